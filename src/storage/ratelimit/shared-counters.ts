import type { Clock } from "../../lib/clock.js";
import type {
  CallDecision,
  CounterOutcome,
  CreditCheck,
  DecidedWindow,
  RatelimitBatchStore,
  RatelimitCounterStore,
  WindowCheck,
} from "../counter-interfaces.js";
import { CallBatcher } from "./call-batcher.js";
import { ExhaustedWindows } from "./exhausted-windows.js";
import { Reservations } from "./reservations.js";
import { StoreClock } from "./store-clock.js";

export interface SharedCountersOptions {
  /** ratelimit.reservations: whether calls may be admitted from units reserved in the store. */
  reservations: boolean;
  /** Keys (checks and credit checks) one batch may use at most. */
  maxKeysPerBatch: number;
}

/**
 * Counters shared by every instance (a batch store: Redis), with the policies that spare it round trips:
 * a call is admitted from reserved units (Reservations), else denied when its window is known to be exhausted
 * (ExhaustedWindows), else decided by the store in a batch with the calls made at the same moment (CallBatcher).
 * Local decisions use the store's time as estimated by StoreClock. Only reservations change what is admitted,
 * within their stated budget; everything else answers exactly as the store would.
 */
export class SharedCounters implements RatelimitCounterStore {
  private readonly storeClock: StoreClock;
  private readonly batcher: CallBatcher;
  private readonly exhausted = new ExhaustedWindows();
  private readonly reservations: Reservations | undefined;

  constructor(store: RatelimitBatchStore, clock: Clock, options: SharedCountersOptions) {
    this.storeClock = new StoreClock(clock);
    this.batcher = new CallBatcher(this.storeClock.measuring(store), options.maxKeysPerBatch);
    this.reservations = options.reservations ? new Reservations() : undefined;
  }

  applyChecks(workspaceId: string, checks: readonly WindowCheck[], now?: number, credit?: CreditCheck): Promise<CounterOutcome> {
    const at = this.storeClock.at(now);
    const admitted = this.reservations?.admit(workspaceId, checks, credit, at);
    if (admitted) return Promise.resolve(decidedHere(admitted));
    // A limit known to be exhausted denies the call whatever the balance says, so this holds with credits too.
    const denied = this.exhausted.denial(workspaceId, checks, at);
    if (denied) return Promise.resolve(decidedHere(denied));
    const reserve = this.reservations?.ask(workspaceId, checks, credit);
    if (reserve === undefined)
      return this.batcher.decide(workspaceId, { checks, credit }, now).then((answer) => this.learn(workspaceId, checks, answer));
    const decision = this.batcher.decide(workspaceId, { checks, credit, reserve }, now);
    const settled = () => this.reservations?.settled(workspaceId, checks);
    return decision.then(
      (answer) => {
        settled();
        return this.learn(workspaceId, checks, answer);
      },
      (error: unknown) => {
        settled();
        throw error;
      },
    );
  }

  /** Forgets what was learnt from the store, which may have restarted without its data (after an outage). */
  forget(): void {
    this.exhausted.forget();
    this.reservations?.forget();
  }

  /**
   * Remembers what the store answered, and answers the call with the units this instance holds counted in. The
   * answer is written out rather than spread from the store's (docs/architecture.md#conventions).
   */
  private learn(workspaceId: string, checks: readonly WindowCheck[], { outcome, windows }: CallDecision): CounterOutcome {
    const results = outcome.results.map((result, index) => {
      const check = checks[index] as WindowCheck;
      const window = windows[index] as DecidedWindow;
      this.exhausted.observe(workspaceId, check, window);
      const held = this.reservations?.observe(workspaceId, check, window, result.remaining) ?? 0;
      return held > 0 ? { passed: result.passed, remaining: result.remaining + held, resetAt: result.resetAt } : result;
    });
    const answer: CounterOutcome = { passed: outcome.passed, results, now: outcome.now };
    if (outcome.credit !== undefined) answer.credit = outcome.credit;
    if (outcome.decidedLocally !== undefined) answer.decidedLocally = outcome.decidedLocally;
    return answer;
  }
}

/**
 * A local answer (a fresh object of this instance's) marked as such. Set rather than copied with
 * `{ ...outcome, decidedLocally: true }`: on Node 20 a property an object literal adds after a spread costs about
 * 3 µs, and most calls of a busy limit are answered here.
 */
function decidedHere(outcome: CounterOutcome): CounterOutcome {
  outcome.decidedLocally = true;
  return outcome;
}
