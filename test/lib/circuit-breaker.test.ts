import t from "tap";
import { CircuitBreaker, CircuitOpenError } from "../../src/lib/circuit-breaker.js";
import { ManualClock } from "../helpers/clock.js";

function setup(options: { isFailure?: (error: unknown) => boolean } = {}) {
  const clock = new ManualClock();
  const probe = { calls: 0, answer: Promise.resolve() as Promise<unknown> };
  const states: string[] = [];
  const breaker = new CircuitBreaker({
    failureThreshold: 3,
    openMs: 1_000,
    clock,
    probe: () => {
      probe.calls++;
      return probe.answer;
    },
    ...options,
  });
  breaker.onStateChange((state) => states.push(state));
  let operations = 0;
  const fail = () => breaker.run(async () => {
    operations++;
    throw new Error("backend down");
  });
  const succeed = () => breaker.run(async () => {
    operations++;
    return "ok";
  });
  return { clock, probe, states, breaker, fail, succeed, operations: () => operations };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

t.test("stays closed while failures are not consecutive", async (t) => {
  const { breaker, fail, succeed } = setup();
  for (let round = 0; round < 3; round++) {
    await t.rejects(fail(), /backend down/);
    await t.rejects(fail(), /backend down/);
    t.equal(await succeed(), "ok");
  }
  t.equal(breaker.state, "closed");
});

t.test("opens after the threshold of consecutive failures and then fails without calling the backend", async (t) => {
  const { breaker, fail, succeed, operations, clock, states } = setup();
  for (let i = 0; i < 3; i++) await t.rejects(fail(), /backend down/);
  t.equal(breaker.state, "open");
  t.same(states, ["open"]);
  clock.advance(400);
  const error = await succeed().catch((failure: unknown) => failure);
  t.ok(error instanceof CircuitOpenError);
  t.equal((error as CircuitOpenError).retryAfterMs, 600);
  t.equal(operations(), 3, "the backend was not called while open");
});

t.test("after openMs one background probe runs; calls fail fast meanwhile; its success closes the circuit", async (t) => {
  const { breaker, fail, succeed, probe, clock, states } = setup();
  let release!: () => void;
  probe.answer = new Promise<void>((resolve) => (release = resolve));
  for (let i = 0; i < 3; i++) await t.rejects(fail());
  clock.advance(999);
  await t.rejects(succeed(), CircuitOpenError);
  t.equal(probe.calls, 0, "no probe before openMs");
  clock.advance(1);
  await t.rejects(succeed(), CircuitOpenError, "the call that starts the probe still fails fast");
  await t.rejects(succeed(), CircuitOpenError);
  t.equal(probe.calls, 1, "one probe at a time");
  t.equal(breaker.state, "probing");
  release();
  await settle();
  t.equal(breaker.state, "closed");
  t.equal(await succeed(), "ok");
  t.same(states, ["open", "probing", "closed"]);
});

t.test("a failed probe keeps the circuit open for another openMs", async (t) => {
  const { breaker, fail, succeed, probe, clock } = setup();
  probe.answer = Promise.reject(new Error("still down"));
  probe.answer.catch(() => {});
  for (let i = 0; i < 3; i++) await t.rejects(fail());
  clock.advance(1_000);
  await t.rejects(succeed(), CircuitOpenError);
  await settle();
  t.equal(breaker.state, "open");
  clock.advance(999);
  await t.rejects(succeed(), CircuitOpenError);
  t.equal(probe.calls, 1, "the next probe waits openMs from the failed one");
  probe.answer = Promise.resolve();
  clock.advance(1);
  await t.rejects(succeed(), CircuitOpenError);
  await settle();
  t.equal(breaker.state, "closed");
});

t.test("errors that are not failures of the backend pass through uncounted", async (t) => {
  const { breaker, fail } = setup({ isFailure: (error) => !(error instanceof Error && error.message === "backend down") });
  for (let i = 0; i < 10; i++) await t.rejects(fail(), /backend down/);
  t.equal(breaker.state, "closed");
});
