import type { CreditsNotice, KeySubject, NoticeSink } from "../notices.js";
import type { KeyView } from "./key-view.js";

/**
 * Posts the notices of a balance this verification crossed (docs/decisions.md#credit-crossings). The spend was
 * atomic, so the balance before it was `remaining + spent`: of all verifications on every instance, exactly one
 * takes the balance from above the low threshold to at or below it, and exactly one takes it to 0. A top-up (or a
 * refill) lifts it above again, and the next crossing posts again. Returns the receipt of what it posted (undefined
 * when nothing crossed), for the verification to wait for before it is answered.
 */
export function postCreditCrossings(sink: NoticeSink, view: KeyView, spent: number, remaining: number): Promise<void> | undefined {
  if (spent <= 0 || view.creditsSource === undefined) return undefined;
  let posted: Promise<void> | undefined;
  const before = remaining + spent;
  const threshold = view.creditsLowThreshold;
  const identityPays = view.creditsSource === "identity";
  if (threshold !== undefined && before > threshold && remaining <= threshold) {
    const notice: CreditsNotice = {
      type: identityPays ? "identity.credits.low" : "key.credits.low",
      subject: subjectOf(view),
      remaining,
      threshold,
    };
    posted = sink.post(notice);
  }
  if (remaining === 0) {
    const notice: CreditsNotice = {
      type: identityPays ? "identity.credits.exhausted" : "key.credits.exhausted",
      subject: subjectOf(view),
      remaining,
    };
    if (threshold !== undefined) notice.threshold = threshold;
    posted = sink.post(notice);
  }
  // Notices are written in the order posted: the last one's receipt covers both.
  return posted;
}

/** The key a notice is about, and its identity when it has one; never the key itself. */
export function subjectOf(view: KeyView): KeySubject {
  const subject: KeySubject = { workspaceId: view.workspaceId, apiId: view.apiId, keyId: view.keyId };
  if (view.identity) {
    subject.identityId = view.identity.id;
    subject.externalId = view.identity.externalId;
  }
  return subject;
}
