/**
 * A value now, or a promise of it. The hot paths (a cached root key, a cached key with nothing to count) return
 * their answer synchronously: every `await` costs a promise and a trip through the microtask queue, even on a
 * value that is already there. A function returning Awaitable may throw at once rather than reject. Callers
 * either `await` it inside an async function or return it from a Fastify handler, where both end up the same way,
 * or call it inside a `try` and pass a rejection to the same place (the callback-style root-key hook).
 */
export type Awaitable<T> = T | Promise<T>;

/** `next(value)` now if the value is here, once it arrives if it is a promise. */
export function andThen<T, U>(value: Awaitable<T>, next: (value: T) => Awaitable<U>): Awaitable<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}
