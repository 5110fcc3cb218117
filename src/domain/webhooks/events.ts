import type { KeySubject, Notice, NoticeType } from "../notices.js";

/** Events a background job produces for each endpoint rather than notices: usage reports (docs/usage.md). */
export const USAGE_EVENT_TYPES = ["usage.reported", "usage.corrected"] as const;
export type UsageEventType = (typeof USAGE_EVENT_TYPES)[number];

/** Every event type an endpoint can subscribe to: as notices name them, and the usage reports. */
export const WEBHOOK_EVENT_TYPES: readonly (NoticeType | UsageEventType)[] = [
  "key.created",
  "key.updated",
  "key.deleted",
  "key.expiring",
  "key.credits.low",
  "key.credits.exhausted",
  "identity.credits.low",
  "identity.credits.exhausted",
  "ratelimit.exceeded",
  ...USAGE_EVENT_TYPES,
];

/** What testWebhook sends: to the one endpoint asked, whatever it subscribes to. */
export const TEST_EVENT_TYPE = "webhook.test";

function subjectData(subject: KeySubject): Record<string, unknown> {
  const data: Record<string, unknown> = { workspaceId: subject.workspaceId, apiId: subject.apiId, keyId: subject.keyId };
  if (subject.identityId !== undefined) data.identityId = subject.identityId;
  if (subject.externalId !== undefined) data.externalId = subject.externalId;
  return data;
}

/** The workspace a notice belongs to. */
export function workspaceOf(notice: Notice): string {
  return notice.type === "ratelimit.exceeded" ? notice.workspaceId : notice.subject.workspaceId;
}

/** The event's `data`: ids of what it is about and the numbers that matter, never a key's secret. */
export function eventData(notice: Notice): Record<string, unknown> {
  switch (notice.type) {
    case "ratelimit.exceeded": {
      const data: Record<string, unknown> = notice.subject ? subjectData(notice.subject) : { workspaceId: notice.workspaceId };
      data.namespaceId = notice.namespaceId;
      data.namespaceName = notice.namespaceName;
      data.identifier = notice.identifier;
      data.limit = notice.limit;
      data.duration = notice.duration;
      data.reset = notice.reset;
      return data;
    }
    case "key.credits.low":
    case "key.credits.exhausted":
    case "identity.credits.low":
    case "identity.credits.exhausted": {
      const data = subjectData(notice.subject);
      data.remaining = notice.remaining;
      if (notice.threshold !== undefined) data.threshold = notice.threshold;
      return data;
    }
    default: {
      const data = subjectData(notice.subject);
      if (notice.expires !== undefined) data.expires = notice.expires;
      return data;
    }
  }
}

/** The body of an event as sent: `type`, `timestamp` (ISO 8601) and `data`, the shape Standard Webhooks suggests. */
export function eventBody(type: string, at: number, data: Record<string, unknown>): string {
  return JSON.stringify({ type, timestamp: new Date(at).toISOString(), data });
}
