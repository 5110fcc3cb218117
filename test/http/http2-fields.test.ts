import t from "tap";
import { allowedOnce, fitForHttp2 } from "../../src/http/http2.js";

// Which fields HTTP/2 allows once is Node's own list, kept to itself: keygate asks Node, so a Node that changes the
// list changes keygate's answers with it. These are fields Node has allowed once, or many times, since HTTP/2 came.

t.test("Node is asked which fields its HTTP/2 allows once", async (t) => {
  for (const name of ["content-type", "content-length", "etag", "location", "last-modified"]) t.ok(allowedOnce(name), `${name}: once`);
  for (const name of ["set-cookie", "vary", "cache-control", "x-many", "link"]) t.notOk(allowedOnce(name), `${name}: many times`);
  t.ok(allowedOnce("content-type"), "asked again: the same answer");
});

t.test("an answer's head fit for HTTP/2 keeps the first value of a field allowed once, every value of the others", async (t) => {
  const head = fitForHttp2({
    connection: "close",
    "content-type": ["text/plain", "text/html"],
    "set-cookie": ["a=1", "b=2"],
    "x-many": ["a", "b"],
  });
  t.same(head, { "content-type": "text/plain", "set-cookie": ["a=1", "b=2"], "x-many": ["a", "b"] });
});
