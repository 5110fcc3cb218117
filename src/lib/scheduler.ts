/**
 * Runs a task later. Injected where a component acts on its own in the background (the circuit breaker's probes),
 * so tests can run the task when they choose instead of waiting.
 */
export interface Scheduler {
  /** Runs `task` once after `ms`. Returns a function that cancels it (a no-op once it ran). */
  schedule(task: () => void, ms: number): () => void;
}

/** Node timers, unref'd: a pending task never keeps the process alive. */
export const systemScheduler: Scheduler = {
  schedule(task, ms) {
    const timer = setTimeout(task, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};
