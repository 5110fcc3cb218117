import t from "tap";
import { baselineNote } from "../../bench/side-by-side.js";

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
