import { parseArgs } from 'node:util';
import { InputError } from '../errors.ts';

/** Output of a command: what it prints, so tests and the CLI share one code path. */
export interface Io {
  out(line: string): void;
  /**
   * A warning about work that was done all the same (`withDatabase`: the servers could not be told
   * of a change). `main` writes it on standard error after everything the command printed, so that
   * a result shown once, such as a new key, comes first, and the command still exits 0.
   */
  warn(line: string): void;
  readStdin(): Promise<string>;
}

/**
 * One thing the operator can run: `safety-api serve`, `safety-api keys create`, …. Its help is
 * data beside its code, so `--help` can never describe a command that does not exist.
 */
export interface Command {
  /** The words after `safety-api`, e.g. `keys create`. */
  name: string;
  /** One line: what it does. */
  summary: string;
  /** The synopsis lines, each starting with `safety-api`. */
  usage: string[];
  /** Option and argument notes, one line each. */
  notes?: string[];
  /** One example invocation. */
  example: string;
  run(args: string[], io: Io): Promise<void>;
}

/** A command with subcommands, e.g. `keys`. */
export interface CommandGroup {
  name: string;
  summary: string;
  subcommands: Command[];
}

/** The help text of one command. */
export function commandHelp(command: Command): string {
  return [
    `${command.summary}`,
    '',
    'usage:',
    ...command.usage.map((line) => `  ${line}`),
    ...(command.notes === undefined ? [] : ['', ...command.notes.map((line) => `  ${line}`)]),
    '',
    'example:',
    `  ${command.example}`,
  ].join('\n');
}

/** The help text of a group: its subcommands, one line each. */
export function groupHelp(group: CommandGroup): string {
  const width = Math.max(...group.subcommands.map((c) => c.name.length));
  return [
    group.summary,
    '',
    'commands:',
    ...group.subcommands.map((c) => `  safety-api ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    `Run "safety-api ${group.name} COMMAND --help" for the options and an example of each.`,
  ].join('\n');
}

/** Exactly `count` positional arguments, or an InputError that shows the usage. */
export function positionals(args: string[], count: number, usage: string): string[] {
  const { positionals: values } = parseArgs({ args, allowPositionals: true, options: {} });
  if (values.length !== count) throw new InputError(`usage: ${usage}`);
  return values;
}
