/** A source of the current time, in unix milliseconds. Injected wherever time matters so tests can move it. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
