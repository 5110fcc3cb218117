import type { RouteView } from "./policy-drafts.js";

/**
 * A route's upstream: its URL, or a pool's targets, each with its weight and its state on the instance that answered
 * (in, or out with why and until when). URLs come masked from the API.
 */
export function UpstreamCell(props: { route: RouteView }) {
  const { upstream, upstreamHealth } = props.route;
  if (typeof upstream === "string") return <code>{upstream}</code>;
  return (
    <div>
      <small>
        pool, {upstream.balance ?? "round-robin"}
        {upstream.retry ? `, retries ${upstream.retry.attempts ?? 1}` : ""}
        {upstream.tls ? ", own TLS" : ""}
      </small>
      <ul class="policies" aria-label="Upstream targets">
        {upstream.targets.map((target, index) => {
          // getRoute lists the targets' states in the order of the targets.
          const state = upstreamHealth?.[index];
          return (
            <li key={target.url}>
              <code>{target.url}</code> ×{target.weight ?? 1}{" "}
              {state === undefined ? "" : state.healthy ? <strong>in</strong> : <strong class="danger">{outBecause(state)}</strong>}
              {state !== undefined && state.inFlight > 0 ? ` (${state.inFlight} in flight)` : ""}
            </li>
          );
        })}
      </ul>
    </div>
  );
}

type TargetState = NonNullable<RouteView["upstreamHealth"]>[number];

function outBecause(state: TargetState): string {
  if (state.probedHealthy === false) return "out: fails its health checks";
  const until = state.ejectedUntil === undefined ? "" : ` until ${new Date(state.ejectedUntil).toLocaleTimeString()}`;
  return `out: ejected after ${state.failures} failures${until}`;
}
