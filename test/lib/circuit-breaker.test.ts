import t from "tap";
import { CircuitBreaker, CircuitOpenError } from "../../src/lib/circuit-breaker.js";
import { ManualClock, ManualScheduler } from "../helpers/clock.js";

function setup(options: { isFailure?: (error: unknown) => boolean } = {}) {
  const clock = new ManualClock();
  const scheduler = new ManualScheduler(clock);
  const probe = { calls: 0, answer: Promise.resolve() as Promise<unknown> };
  const states: string[] = [];
  const breaker = new CircuitBreaker({
    failureThreshold: 3,
    openMs: 1_000,
    clock,
    scheduler,
    probe: () => {
      probe.calls++;
      return probe.answer;
    },
    ...options,
  });
  breaker.onStateChange((state) => states.push(state));
  let operations = 0;
  const fail = () =>
    breaker.run(async () => {
      operations++;
      throw new Error("backend down");
    });
  const succeed = () =>
    breaker.run(async () => {
      operations++;
      return "ok";
    });
  return { clock, scheduler, probe, states, breaker, fail, succeed, operations: () => operations };
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

t.test(
  "a call after openMs starts the probe when the timer has not yet; calls fail fast meanwhile; its success closes the circuit",
  async (t) => {
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
  },
);

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

t.test("while open, a background probe runs every openMs without any call, and its success closes the circuit", async (t) => {
  const { breaker, fail, succeed, probe, scheduler, states, operations } = setup();
  probe.answer = Promise.reject(new Error("still down"));
  probe.answer.catch(() => {});
  for (let i = 0; i < 3; i++) await t.rejects(fail());
  scheduler.advance(999);
  t.equal(probe.calls, 0, "no probe before openMs");
  scheduler.advance(1);
  t.equal(probe.calls, 1, "the first probe, with no call made");
  await settle();
  t.equal(breaker.state, "open", "a failed probe keeps the circuit open");
  scheduler.advance(1_000);
  t.equal(probe.calls, 2, "and the next one follows openMs later");
  probe.answer = Promise.resolve();
  await settle();
  scheduler.advance(1_000);
  t.equal(probe.calls, 3);
  await settle();
  t.equal(breaker.state, "closed", "closed by the probe alone");
  t.same(states, ["open", "probing", "open", "probing", "open", "probing", "closed"]);
  t.equal(scheduler.pending, 0, "no timer is left once closed");
  const before = operations();
  t.equal(await succeed(), "ok", "the first call after that reaches the backend");
  t.equal(operations(), before + 1);
});

t.test("a probe started by a call cancels the timer: one probe at a time", async (t) => {
  const { breaker, fail, succeed, probe, clock, scheduler } = setup();
  let release!: () => void;
  probe.answer = new Promise<void>((resolve) => (release = resolve));
  for (let i = 0; i < 3; i++) await t.rejects(fail());
  clock.advance(1_000);
  await t.rejects(succeed(), CircuitOpenError);
  t.equal(probe.calls, 1);
  t.equal(scheduler.pending, 0, "the timer's probe will not run as well");
  scheduler.advance(5_000);
  t.equal(probe.calls, 1);
  release();
  await settle();
  t.equal(breaker.state, "closed");
});

t.test("stop() cancels the pending probe and schedules no other", async (t) => {
  const { breaker, fail, probe, scheduler } = setup();
  probe.answer = Promise.reject(new Error("still down"));
  probe.answer.catch(() => {});
  for (let i = 0; i < 3; i++) await t.rejects(fail());
  t.equal(scheduler.pending, 1, "open: one probe is scheduled");
  breaker.stop();
  t.equal(scheduler.pending, 0);
  scheduler.advance(10_000);
  t.equal(probe.calls, 0);
  t.equal(breaker.state, "open");
});
