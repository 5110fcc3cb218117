import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import t from "tap";
import { EventList } from "../../src/analytics/analytics-engine.js";
import { EmbeddedEngine } from "../../src/analytics/embedded-engine.js";
import { RowBinaryWriter, rowLayout } from "../../src/analytics/row-binary.js";
import { toRow, VERIFICATIONS } from "../../src/analytics/rows.js";
import { schemaStatements } from "../../src/analytics/schema.js";
import { AnalyticsEngineError } from "../../src/domain/analytics/query-engine.js";
import { analyticsDir, event, insertEvents } from "../helpers/analytics.js";

const hex = (writer: RowBinaryWriter) => writer.bytes().toString("hex");
const LAYOUT = rowLayout(VERIFICATIONS.types);

t.test("the writer lays values out as ClickHouse's RowBinary", async (t) => {
  const strings = new RowBinaryWriter(1);
  strings.string("");
  strings.string("ab");
  strings.string("é");
  t.equal(hex(strings), "00" + "026162" + "02c3a9", "a varint byte length, then the UTF-8 bytes");

  // ASCII is copied by the writer itself; a character beyond ASCII anywhere in the value sends all of it through UTF-8.
  const mixed = new RowBinaryWriter(1);
  for (const value of ["abcé", "z", "é".repeat(40), "\u007f", "\u0080", "a😀b"]) mixed.string(value);
  const expected = ["abcé", "z", "é".repeat(40), "\u007f", "\u0080", "a😀b"].map((value) => {
    const utf8 = Buffer.from(value, "utf8");
    return Buffer.concat([Buffer.from([utf8.length]), utf8]).toString("hex");
  });
  t.equal(hex(mixed), expected.join(""), "values that turn out not to be ASCII part-way are written whole, in UTF-8");

  const lengths = new RowBinaryWriter(1);
  for (const length of [127, 128, 16_384]) lengths.string("x".repeat(length));
  const bytes = lengths.bytes();
  t.same([...bytes.subarray(0, 1)], [0x7f], "127: one byte");
  t.same([...bytes.subarray(128, 130)], [0x80, 0x01], "128: two bytes, low seven bits first");
  t.same([...bytes.subarray(258, 261)], [0x80, 0x80, 0x01], "16,384: three bytes");
  t.equal(bytes.length, 1 + 127 + 2 + 128 + 3 + 16_384);

  const numbers = new RowBinaryWriter(1);
  numbers.int64(1);
  numbers.int64(-1);
  numbers.int64(2 ** 32);
  numbers.int64(-(2 ** 32) - 1);
  numbers.int64(Number.MAX_SAFE_INTEGER);
  t.equal(
    hex(numbers),
    ["0100000000000000", "ffffffffffffffff", "0000000001000000", "fffffffffeffffff", "ffffffffffff1f00"].join(""),
    "Int64: eight bytes, little-endian two's complement",
  );

  const arrays = new RowBinaryWriter(1);
  arrays.strings([]);
  arrays.strings(["a", "bc"]);
  arrays.float64(0.5);
  t.equal(
    hex(arrays),
    "00" + "02" + "0161" + "026263" + "000000000000e03f",
    "arrays: a varint count, then each string; Float64 little-endian",
  );
});

t.test("a writer sized for few rows grows to hold many, keeping what it had", async (t) => {
  const writer = new RowBinaryWriter(1);
  const long = "ü".repeat(5_000);
  for (let index = 0; index < 10; index++) writer.string(`${index}${long}`);
  const bytes = writer.bytes();
  const each = 2 + 1 + Buffer.byteLength(long);
  t.equal(bytes.length, 10 * each);
  for (let index = 0; index < 10; index++)
    t.equal(bytes.subarray(index * each + 2, index * each + 3).toString(), String(index), `string ${index} intact`);
});

t.test("a writer that is reset starts over in the memory it has, and writes as a new one would", async (t) => {
  const reused = new RowBinaryWriter(1);
  reused.string("x".repeat(3_000));
  reused.int64(7);
  reused.reset();
  t.equal(reused.bytes().length, 0, "nothing is left of what came before");
  const fresh = new RowBinaryWriter(1);
  const row = VERIFICATIONS.values(event({ requestId: "req_reset", tags: ["a"] }), "eu");
  for (const writer of [reused, fresh]) {
    writer.write(row, LAYOUT);
    writer.string("ünï");
  }
  t.equal(hex(reused), hex(fresh));
});

t.test("a row with a value that cannot be written leaves nothing of itself behind", async (t) => {
  const writer = new RowBinaryWriter(1);
  writer.write(VERIFICATIONS.values(event({ requestId: "req_before", time: 1 }), "eu"), LAYOUT);
  const before = hex(writer);
  const broken = event({ requestId: "req_broken", tags: [7 as unknown as string] });
  t.throws(() => writer.write(VERIFICATIONS.values(broken, "eu"), LAYOUT), TypeError);
  t.equal(hex(writer), before, "the rows before it, and not a byte more");
});

t.test("a data directory whose path the engine's file() would take as a pattern is refused at open, with the reason", async (t) => {
  const parent = analyticsDir(t);
  for (const name of ["data{1,2}", "data*", "data?"]) {
    const path = join(parent, name);
    mkdirSync(path);
    await t.rejects(EmbeddedEngine.open(path, "keygate"), { message: /must not contain \*, \?, \{ or \}/ }, name);
  }
});

t.test("the embedded engine reads batches back exactly, and leaves no batch file behind", async (t) => {
  const dir = analyticsDir(t);
  const stale = join(dir, "incoming");
  mkdirSync(stale, { recursive: true });
  writeFileSync(join(stale, "batch-1.bin"), "left by a process that stopped mid-insert");

  const engine = await EmbeddedEngine.open(dir, "keygate");
  t.teardown(() => engine.close());
  t.same(readdirSync(stale), [], "opening clears what an earlier process left in incoming/");
  for (const statement of schemaStatements("keygate", { raw: 90, perMinute: 90, perHour: 90, perDay: 365, perMonth: 1_095, audit: 365 }))
    await engine.command(statement);

  const time = Date.UTC(2026, 10, 22, 12, 0, 0);
  const events = [
    event({ requestId: "req_rb_1", time, keyId: "k".repeat(200), externalId: "ünïcødé 🔑", tags: [], spentCredits: 0, latencyMs: 0 }),
    event({ requestId: "req_rb_2", time: time + 1, tags: ["a", "x".repeat(20_000), ""], spentCredits: -3, latencyMs: 1.25 }),
    event({
      requestId: "req_rb_3",
      time: time + 2,
      identityId: "id_1",
      spentCredits: 2 ** 40,
      creditsSource: "identity",
      latencyMs: Number.NaN,
    }),
    event({ requestId: "req_rb_4", time: time + 3, spentCredits: 1e30, latencyMs: 1e-9 }),
  ];
  await insertEvents(engine, events, "eu-west");
  t.same(readdirSync(stale), [], "the batch file is deleted once inserted");

  const rows = await engine.withConnection((connection) =>
    connection.rows(
      "SELECT request_id, time, workspace_id, key_space_id, identity_id, external_id, key_id, region, outcome, tags, spent_credits, latency, credits_source FROM key_verifications_v1 ORDER BY request_id",
    ),
  );
  // The engine's JSON output quotes 64-bit integers; every other value comes back as it went in.
  const expected = events.map((each) => {
    const row = toRow(VERIFICATIONS, each, "eu-west");
    return { ...row, time: String(row.time), spent_credits: String(row.spent_credits) };
  });
  t.same(rows, expected, "every column of every row, as toRow() describes it");
  t.equal(
    VERIFICATIONS.values(events[3]!, "")[10],
    Number.MAX_SAFE_INTEGER,
    "an Int64 beyond 2^53 is held at 2^53 - 1, the largest a double holds exactly",
  );

  const perMinute = await engine.withConnection((connection) =>
    connection.rows("SELECT sum(count) AS n FROM key_verifications_per_minute_v1"),
  );
  t.same(perMinute, [{ n: "4" }], "the aggregates are fed from the same insert");

  // Two engines of one process on the directory (chDB binds one per process) writing at the same time: each
  // batch lands once, and the second engine's opening leaves the first one's files alone.
  const second = await EmbeddedEngine.open(dir, "keygate");
  t.teardown(() => second.close());
  const batch = (prefix: string) =>
    Array.from({ length: 500 }, (_, index) => event({ requestId: `req_${prefix}_${index}`, workspaceId: "ws_two_engines" }));
  // The first engine has written one batch and the second none: numbered per engine, two files would share a name.
  await Promise.all([
    insertEvents(engine, batch("first"), ""),
    insertEvents(second, batch("second"), ""),
    insertEvents(second, batch("third"), ""),
  ]);
  const counted = await engine.withConnection((connection) =>
    connection.rows("SELECT count() AS n, uniqExact(request_id) AS ids FROM key_verifications_v1 WHERE workspace_id = 'ws_two_engines'"),
  );
  t.same(counted, [{ n: "1500", ids: "1500" }], "three batches from two engines, each row once");
  t.same(readdirSync(stale), [], "no batch file left");

  // The first engine's encoder, reused from its last batch of 500 rows, writes a batch of two and nothing more.
  const small = [
    event({ requestId: "req_small_1", workspaceId: "ws_reused", keyId: "key_a" }),
    event({ requestId: "req_small_2", workspaceId: "ws_reused", tags: ["t"] }),
  ];
  await insertEvents(engine, small, "us");
  const reusedRows = await engine.withConnection((connection) =>
    connection.rows(
      "SELECT request_id, key_id, region, tags FROM key_verifications_v1 WHERE workspace_id = 'ws_reused' ORDER BY request_id",
    ),
  );
  t.same(
    reusedRows,
    small.map((each) => ({ request_id: each.requestId, key_id: each.keyId, region: "us", tags: each.tags })),
    "a reused encoder's batch holds its own rows only",
  );
  const total = await engine.withConnection((connection) => connection.rows("SELECT count() AS n FROM key_verifications_v1"));
  t.same(total, [{ n: String(events.length + 1500 + small.length) }], "and no row of an earlier batch again");

  await t.rejects(engine.insertBatch(new EventList(VERIFICATIONS, "")), TypeError, "a batch made by another kind of engine is refused");

  // A third engine on the same directory, in a database without the schema.
  const refusing = await EmbeddedEngine.open(dir, "keygate_no_schema");
  t.teardown(() => refusing.close());
  await t.rejects(insertEvents(refusing, [event()], ""), AnalyticsEngineError, "an insert the engine refuses fails as an engine error");
  t.same(readdirSync(stale), [], "and its batch file is deleted too");
});
