import { InputError } from '../errors.ts';
import { storageProblem } from '../lib/storable-text.ts';

/** `text`, if both stores can keep it as it is (`storageProblem`); otherwise an InputError naming `field`. */
export function storableText(field: string, text: string): string {
  const problem = storageProblem(text);
  if (problem !== null) throw new InputError(`${field} ${problem}`);
  return text;
}
