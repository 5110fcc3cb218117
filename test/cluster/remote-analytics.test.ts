import t from "tap";
import { type AuditMessage, Channel, type EventsMessage, type Message, type Question } from "../../src/cluster/channel.js";
import { recordHandedOver, remoteAnalytics } from "../../src/cluster/remote-analytics.js";
import {
  creditRefundEvent,
  event,
  gatewayRequestEvent,
  type RecordedEvents,
  ratelimitEvent,
  recordingAnalytics,
} from "../helpers/analytics.js";

/**
 * A worker's analytics hand every kind of event to the primary with its kind, and the primary records each in the
 * sink of that kind. The two sides are joined here by plain function calls where processes use IPC.
 */
function link() {
  const inPrimary: Required<RecordedEvents> = { verifications: [], ratelimits: [], gatewayRequests: [], creditRefunds: [] };
  const primary = recordingAnalytics(inPrimary);
  const handedOver: (EventsMessage | AuditMessage)[] = [];
  const asked: Question["kind"][] = [];
  const sides: { worker?: Channel; primary?: Channel } = {};
  sides.worker = new Channel(
    (message) => sides.primary?.receive(message),
    async () => undefined,
  );
  sides.primary = new Channel(
    (message) => sides.worker?.receive(message),
    async (question) => void asked.push(question.kind),
  );
  const send = (message: Message, done: () => void) => {
    if (message.keygate !== "events") throw new Error(`only events are sent this way, not ${message.keygate}`);
    handedOver.push(message);
    recordHandedOver(primary, message);
    done();
  };
  return { worker: remoteAnalytics(sides.worker, send), inPrimary, handedOver, asked, primary };
}

t.test("flush hands over one message per kind, with its kind, before asking the primary to write", async (t) => {
  const { worker, inPrimary, handedOver, asked } = link();
  const verifications = [event({ externalId: "v1" }), event({ externalId: "v2" })];
  const ratelimits = [ratelimitEvent({ identifier: "r1" }), ratelimitEvent({ identifier: "r2" }), ratelimitEvent({ identifier: "r3" })];
  const gatewayRequests = [gatewayRequestEvent({ path: "/g1" })];
  const creditRefunds = [creditRefundEvent({ keyId: "key_refunded" })];
  for (const each of verifications) worker.sinks.verifications.record(each);
  for (const each of ratelimits) worker.sinks.ratelimits.record(each);
  for (const each of gatewayRequests) worker.sinks.gatewayRequests.record(each);
  for (const each of creditRefunds) worker.sinks.creditRefunds.record(each);
  t.match(worker.stats(), { recorded: 7, buffered: 7 });
  t.same(handedOver, [], "nothing handed over before the flush");

  await worker.flush();
  t.same(
    handedOver.map((message) => [message.kind, message.events.length]),
    [
      ["verifications", 2],
      ["ratelimits", 3],
      ["gatewayRequests", 1],
      ["creditRefunds", 1],
    ],
  );
  t.same(inPrimary, { verifications, ratelimits, gatewayRequests, creditRefunds }, "each in the primary's sink of its kind, in order");
  t.same(asked, ["analytics-flush"], "then the primary is asked to write");
  t.match(worker.stats(), { recorded: 7, buffered: 0 });
});

t.test("closing hands over what is still gathered; events recorded after it are counted and dropped", async (t) => {
  const { worker, inPrimary } = link();
  worker.sinks.gatewayRequests.record(gatewayRequestEvent({ path: "/before" }));
  worker.sinks.ratelimits.record(ratelimitEvent({ identifier: "before" }));
  await worker.close();
  t.same(
    inPrimary.gatewayRequests.map((e) => e.path),
    ["/before"],
  );
  t.same(
    inPrimary.ratelimits.map((e) => e.identifier),
    ["before"],
  );
  worker.sinks.ratelimits.record(ratelimitEvent({ identifier: "after" }));
  t.equal(inPrimary.ratelimits.length, 1);
  t.match(worker.stats(), { dropped: { afterClose: 1 } });
});
