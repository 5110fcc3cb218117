import type { EncryptedSecret } from "../lib/vault.js";

/** A signing secret as stored: sealed under the vault key when one is configured, as is otherwise (it must sign). */
export type StoredWebhookSecret = { plain: string } | { sealed: EncryptedSecret };

/** An endpoint a workspace registered to be told of events (keygate.createWebhook). */
export interface WebhookEndpointRecord {
  id: string;
  workspaceId: string;
  url: string;
  /** The event types it receives. */
  events: string[];
  description?: string;
  enabled: boolean;
  secret: StoredWebhookSecret;
  /** After rotateWebhookSecret: the secret before, which also signs until `until`. */
  previousSecret?: { secret: StoredWebhookSecret; until: number };
  createdAt: number;
  updatedAt?: number;
  /** When deliveries to it started failing and have not succeeded since. */
  failingSince?: number;
  /** Why keygate disabled it (failing for too long); cleared when it is enabled again. */
  disabledReason?: string;
  /** The periods of its usage reports (usage.reported); hourly when absent. */
  usagePeriod?: "hourly" | "daily";
  /** When it subscribed to usage.reported: its reports start with the period that holds this instant. */
  usageReportsFrom?: number;
}

export type WebhookDeliveryStatus = "pending" | "delivered" | "failed";

/** One event for one endpoint, and how its delivery went (listWebhookDeliveries). */
export interface WebhookDeliveryRecord {
  /** The message id, sent as `webhook-id`: the same on every attempt. */
  id: string;
  workspaceId: string;
  endpointId: string;
  type: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  createdAt: number;
  lastAttemptAt?: number;
  nextAttemptAt?: number;
  responseCode?: number;
  lastError?: string;
}

/** What the outbox carries: everything an attempt needs but the endpoint's URL and secret, read when it is sent. */
export interface OutboxMessage {
  id: string;
  workspaceId: string;
  endpointId: string;
  type: string;
  /** The JSON body, made once, so that every attempt sends the same bytes. */
  payload: string;
  createdAt: number;
}
