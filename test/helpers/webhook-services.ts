import type { Test } from "tap";
import { InvalidationBus } from "../../src/cache/invalidation-bus.js";
import { validateConfig } from "../../src/config/load.js";
import type { Caller } from "../../src/domain/caller.js";
import { RootKeyService } from "../../src/domain/root-keys/root-key-service.js";
import { createServices, type Services } from "../../src/services.js";
import { createMemoryStores } from "../../src/storage/index.js";
import type { Stores } from "../../src/storage/interfaces.js";
import { ManualClock } from "./clock.js";
import { TEST_VAULT_KEY } from "./fixtures.js";
import { Receiver } from "./webhook-receiver.js";

export interface WebhookServices {
  clock: ManualClock;
  stores: Stores;
  services: Services;
  /** An operator of workspace ws_unit. */
  caller: Caller;
  /** A receiver on loopback, stopped when the test ends. */
  receiver: Receiver;
  /** Every notice into the outbox, then one delivery pass. */
  deliver(): Promise<number>;
}

/**
 * keygate's services on memory stores, with `webhooks` settings (private addresses allowed, for the receiver) and
 * the test vault key when `vault` says; nothing runs in the background until the test says.
 */
export async function webhookServices(
  t: Test,
  options: { webhooks?: Record<string, unknown>; vault?: boolean } = {},
): Promise<WebhookServices> {
  const clock = new ManualClock();
  const stores = createMemoryStores({ clock });
  const config = validateConfig({
    analytics: { engine: "off" },
    webhooks: { allowPrivateAddresses: true, ...options.webhooks },
    ...(options.vault ? { vault: { key: TEST_VAULT_KEY } } : {}),
  });
  const services = createServices(stores, config, clock, { invalidations: new InvalidationBus() });
  const caller = new RootKeyService(stores.rootKeys, new InvalidationBus(), clock, []).operator("ws_unit");
  const receiver = new Receiver();
  await receiver.start();
  t.teardown(() => receiver.stop());
  const deliver = async () => {
    await services.webhooks.dispatcher.flush();
    return services.webhooks.deliverer.deliverDue();
  };
  return { clock, stores, services, caller, receiver, deliver };
}
