import t from "tap";
import { parseH2loadOutput, parseWrkOutput, sliceCount, wrkScript } from "../../bench/side-by-side/generator-io.js";

const WRK_OUTPUT = `Running 2s test @ http://127.0.0.1:36693/
  1 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     5.75ms   13.41ms 119.06ms   93.97%
    Req/Sec     4.61k     2.55k    8.61k    60.00%
  Latency Distribution
     50%  830.00us
     75%    4.76ms
     90%   11.72ms
     99%    1.21s
  9192 requests in 2.00s, 584.97KB read
  Socket errors: connect 1, read 2, write 0, timeout 4
  Non-2xx or 3xx responses: 1532
Requests/sec:   4581.93
Transfer/sec:    583.18KB
`;

t.test("wrk's report becomes a slice: requests, seconds, latency in ms whatever wrk's unit, non-2xx, socket errors summed", async (t) => {
  t.same(parseWrkOutput(WRK_OUTPUT), { requests: 9_192, seconds: 2, p50: 1, p99: 1_210, non2xx: 1_532, errors: 7 });
  const quiet = WRK_OUTPUT.replace(/ {2}Socket errors.*\n/, "")
    .replace(/ {2}Non-2xx.*\n/, "")
    .replace("in 2.00s", "in 500.00ms");
  t.same(parseWrkOutput(quiet), { requests: 9_192, seconds: 0.5, p50: 1, p99: 1_210, non2xx: 0, errors: 0 });
});

t.test("wrk's report without a count of requests is an error that shows the report", async (t) => {
  t.throws(() => parseWrkOutput("unable to connect to 127.0.0.1:1 Connection refused\n"), /Connection refused/);
});

t.test("a run is cut into slices of the given length, at least one", async (t) => {
  t.equal(sliceCount(30, 2), 15);
  t.equal(sliceCount(4, 3), 1);
  t.equal(sliceCount(5, 2), 3, "rounded");
  t.equal(sliceCount(1, 2), 1);
});

const H2LOAD_OUTPUT = `starting benchmark...
finished in 2.00s, 2.00 req/s, 1.17KB/s
requests: 4 total, 5 started, 4 done, 3 succeeded, 1 failed, 1 errored, 2 timeout
status codes: 2 2xx, 1 3xx, 1 4xx, 0 5xx
`;

t.test("h2load's report and log become a slice: latency percentiles from the log's durations in µs", async (t) => {
  const log = ["1000\t200\t4000", "2000\t200\t1000", "3000\t302\t3000", "4000\t404\t2000", ""].join("\n");
  t.same(parseH2loadOutput(H2LOAD_OUTPUT, log), { requests: 4, seconds: 2, p50: 3, p99: 4, non2xx: 2, errors: 3 });
  t.same(parseH2loadOutput(H2LOAD_OUTPUT.replace("2.00s", "250ms"), "").seconds, 0.25, "whatever h2load's unit");
  t.ok(Number.isNaN(parseH2loadOutput(H2LOAD_OUTPUT, "").p50), "no latency without a log");
  t.throws(() => parseH2loadOutput("connect error: Connection refused\n", ""), /Connection refused/);
});

t.test("wrk's script sends the target's request: method, headers, a fixed body, or bodies numbered or drawn per request", async (t) => {
  const fixed = wrkScript({ method: "POST", headers: { "content-type": "application/json" }, body: '{"key":"a\\"b"}' }, 0);
  t.equal(
    fixed,
    ['wrk.method = "POST"', 'wrk.headers["content-type"] = "application/json"', 'wrk.body = "{\\"key\\":\\"a\\\\\\"b\\"}"'].join("\n"),
  );
  t.equal(wrkScript({}, 0), 'wrk.method = "GET"', "a GET without headers or body");
  const numbered = wrkScript({ body: { numbered: '{"n":{n}}' } }, 41);
  t.match(numbered, /^local n = 41$/m, "numbers go on from where the run is");
  t.match(numbered, /^local parts = \{ "\{\\"n\\":", "\}" \}$/m, "the body split at {n}");
  t.match(numbered, /table\.concat\(parts, tostring\(n\)\)/);
  t.match(wrkScript({ body: { drawn: "k{n}", from: 1000 } }, 0), /math\.random\(0, 999\)/, "drawn from 0 to from - 1");
});
