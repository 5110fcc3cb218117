import type { FastifyBaseLogger } from "fastify";
import type { KeyService } from "../domain/keys/key-service.js";
import { KeygateError } from "../errors/keygate-error.js";
import { isPrivateAddressRefusal } from "../http/guarded-connections.js";
import type { Allowed } from "./decision.js";
import type { GatewayRequest } from "./gateway-request.js";
import type { CompiledRoute } from "./route-table.js";

/**
 * The error a client gets when the route's upstream did not answer (timed out) or could not be reached (`error`:
 * why; the address of one refused by the guard of API routes stays in the log).
 */
export function upstreamFailure(route: CompiledRoute, timedOut: boolean, error?: unknown): KeygateError {
  if (isPrivateAddressRefusal(error)) {
    return new KeygateError(
      "err:keygate:gateway:upstream_unreachable",
      `The upstream of route '${route.name}' is at an address that routes made through the API may not reach.`,
    );
  }
  return timedOut
    ? new KeygateError("err:keygate:gateway:upstream_timeout", `The upstream of route '${route.name}' did not answer in time.`)
    : new KeygateError("err:keygate:gateway:upstream_unreachable", `The upstream of route '${route.name}' cannot be reached.`);
}

/** The error a client gets when every target of the route's upstream pool is ejected or down. */
export function noHealthyUpstream(route: CompiledRoute): KeygateError {
  return new KeygateError("err:keygate:gateway:no_healthy_upstream", `No target of the upstream of route '${route.name}' is healthy.`);
}

/**
 * Gives back the credits of an allowed request whose upstream then failed (or that was never sent), when the
 * settings say so. The failure is answered once this is done, so a client that sees it finds its credits back.
 * Never rejects.
 */
export async function refundCredits(
  keys: Pick<KeyService, "refundCredits">,
  log: FastifyBaseLogger,
  request: GatewayRequest,
  decision: Allowed,
): Promise<void> {
  const { workspaceId, verification } = decision;
  if (!refundDue(request, decision) || !verification || workspaceId === undefined) return;
  try {
    const { key } = verification;
    const identity = verification.creditsSource === "identity" ? key.identity : undefined;
    // Named as the verification's event names it, so that usage subtracts the refund from what that counted.
    await keys.refundCredits({
      requestId: request.id,
      time: verification.decidedAt,
      workspaceId,
      keySpaceId: key.keySpaceId,
      keyId: key.keyId,
      identityId: key.identity?.id ?? "",
      externalId: key.identity?.externalId ?? "",
      credits: verification.spentCredits,
      creditsSource: identity ? "identity" : "key",
    });
  } catch (error) {
    log.error({ err: error, keyId: verification.key.keyId }, "could not give back the credits of a failed upstream request");
  }
}

/** Whether an allowed request spent credits that its upstream's failure gives back (`refundCreditsOnUpstreamFailure`). */
export function refundDue(request: GatewayRequest, decision: Allowed): boolean {
  return request.snapshot.settings.refundCreditsOnUpstreamFailure && (decision.verification?.spentCredits ?? 0) > 0;
}
