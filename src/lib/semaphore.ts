/** At most `permits` tasks run at once; the others wait in arrival order. */
export class Semaphore {
  private available: number;
  private readonly waiting: (() => void)[] = [];

  constructor(permits: number) {
    if (!Number.isInteger(permits) || permits < 1) throw new Error(`a semaphore needs at least one permit, got ${permits}`);
    this.available = permits;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.available > 0) this.available--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await task();
    } finally {
      // Hand the permit straight to the next waiter, or give it back.
      const next = this.waiting.shift();
      if (next) next();
      else this.available++;
    }
  }
}
