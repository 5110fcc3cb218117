/**
 * Bounded waits for a positive signal. A bound is how long a test gives up after, never an expectation of speed:
 * make it generous, it only costs time when the test fails anyway.
 */

/** Resolves with `promise`, or rejects after `ms` with `what` in the message. */
export function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * Polls `check` every 50 ms until it returns something other than undefined, and returns that (false too: a check
 * may end the wait with a no); a check that throws counts as not yet. After `timeoutMs` it rejects naming `what`,
 * how often it checked, the last reason the check gave (a thrown error or the text it passed to `because`) and what
 * `diagnostics()` adds.
 */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  check: (because: (reason: string) => void) => T | undefined | Promise<T | undefined>,
  diagnostics: () => Promise<string> = async () => "",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let checks = 0;
  let reason: string | undefined;
  const because = (text: string) => {
    reason = text;
  };
  for (;;) {
    checks++;
    try {
      const result = await check(because);
      if (result !== undefined) return result;
    } catch (error) {
      reason = (error as Error).message;
    }
    if (Date.now() >= deadline) {
      let details = "";
      try {
        details = await diagnostics();
      } catch (error) {
        details = `(diagnostics failed: ${(error as Error).message})`;
      }
      const last = reason === undefined ? "" : `; last: ${reason}`;
      throw new Error(
        `timed out after ${timeoutMs} ms waiting until ${what} (checked ${checks} times)${last}${details ? `\n${details}` : ""}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Waits until `problems()` lists none; the last list is the reason given when the wait times out. */
export async function waitUntilNoProblems(
  what: string,
  timeoutMs: number,
  problems: () => Promise<string[]>,
  diagnostics?: () => Promise<string>,
): Promise<void> {
  await waitFor(
    what,
    timeoutMs,
    async (because) => {
      const found = await problems();
      because(found.join("; "));
      return found.length === 0 ? true : undefined;
    },
    diagnostics,
  );
}
