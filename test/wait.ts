// Waiting in tests (test/README.md, "Writing tests"): for an event, with a deadline far above the
// usual time, never a fixed sleep followed by an assertion that the thing has happened.

/** A pause: between the looks of a wait, or to pace a load, never to guess that something happened. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Resolves once `condition` holds, looking every `everyMs`; past `timeoutMs`, fails naming what it
 * waited for (`what` may be a function, to show the state at the deadline).
 */
export async function until(
  condition: () => Promise<boolean> | boolean,
  timeoutMs: number,
  what: string | (() => string | Promise<string>),
  everyMs = 50,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : await what()}`,
      );
    await sleep(everyMs);
  }
}
