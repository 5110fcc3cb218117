import t from "tap";
import { baselineNote, idlePollingNote } from "../../bench/side-by-side.js";

t.test("a baseline that kept about one core busy needs no note", async (t) => {
  t.equal(baselineNote("bare Fastify route", 0.85), undefined);
  t.equal(baselineNote("bare Fastify route", 1.0), undefined);
  t.equal(baselineNote("bare Fastify route", 1.05), undefined);
});

t.test("a baseline kept well under one core busy: something else set its pace", async (t) => {
  const note = baselineNote("bare proxy", 0.7);
  t.match(note, /^the bare proxy kept only 0\.70 of a core busy/);
  t.match(note, /ratio by CPU is the better guide/);
});

t.test("a baseline that used more than one core: helper threads were busy and the ratios flatter keygate", async (t) => {
  const note = baselineNote("bare Fastify route", 1.12);
  t.match(note, /^the bare Fastify route kept 1\.12 cores busy, more than its one event loop can/);
  t.match(note, /both ratios against it flatter keygate/);
});

t.test("the machine's idle CPUs: halting at once is said with why it matters, polling with for how long", async (t) => {
  t.match(idlePollingNote("0\n"), /^idle CPUs halt at once \(guest_halt_poll_ns 0\): .*weighs more on the slower server/);
  t.equal(idlePollingNote("200000\n"), "idle CPUs poll for up to 200 us before they halt (guest_halt_poll_ns 200000)");
  t.equal(idlePollingNote("400"), "idle CPUs poll for up to 0.4 us before they halt (guest_halt_poll_ns 400)", "a short poll is not rounded to none");
});

t.test("no haltpoll driver, or a value that is not a count of nanoseconds: nothing is said", async (t) => {
  t.equal(idlePollingNote(undefined), undefined);
  t.equal(idlePollingNote(""), undefined);
  t.equal(idlePollingNote("fast\n"), undefined);
  t.equal(idlePollingNote("-5"), undefined);
});
