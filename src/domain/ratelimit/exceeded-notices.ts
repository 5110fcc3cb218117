import type { KeySubject, NoticeSink, RatelimitNotice } from "../notices.js";
import type { LimitDecision } from "./limit-decision.js";

/** Windows remembered as told, at most; all forgotten when full (the sink's claim still keeps it once). */
const REMEMBERED = 10_000;

/**
 * Posts ratelimit.exceeded for a namespace limit that denied, once per namespace, identifier and window on this
 * instance (the webhook dispatcher makes it once across instances). An allowed request costs a loop over its
 * decisions and nothing else: no store is asked here.
 */
export class ExceededNotices {
  private readonly sink: NoticeSink;
  /** `workspace \0 namespace \0 identifier` → the end of the window last told. */
  private readonly told = new Map<string, number>();

  constructor(sink: NoticeSink) {
    this.sink = sink;
  }

  /** Posts what the decisions exceeded; returns the receipt of the last notice posted, undefined when none was. */
  note(workspaceId: string, decisions: readonly LimitDecision[], subject?: KeySubject): Promise<void> | undefined {
    let posted: Promise<void> | undefined;
    for (const decision of decisions) {
      if (decision.passed || decision.kind !== "namespace") continue;
      const id = `${workspaceId}\0${decision.namespaceId}\0${decision.identifier}`;
      if (this.told.get(id) === decision.resetAt) continue;
      if (this.told.size >= REMEMBERED) this.told.clear();
      this.told.set(id, decision.resetAt);
      const notice: RatelimitNotice = {
        type: "ratelimit.exceeded",
        workspaceId,
        namespaceId: decision.namespaceId,
        namespaceName: decision.name,
        identifier: decision.identifier,
        limit: decision.check.limit,
        duration: decision.check.durationMs,
        reset: decision.resetAt,
      };
      if (subject !== undefined) notice.subject = subject;
      posted = this.sink.post(notice);
    }
    return posted;
  }
}
