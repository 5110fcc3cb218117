import type { Point } from "./api.js";

const WIDTH = 720;
const HEIGHT = 160;

/** Verifications per bucket as bars (valid in the portal's colour, refused in grey); totals beside. */
export function UsageChart({ points }: { points: Point[] }) {
  const max = Math.max(1, ...points.map((point) => point.total));
  const step = WIDTH / Math.max(1, points.length);
  const total = points.reduce((sum, point) => sum + point.total, 0);
  const valid = points.reduce((sum, point) => sum + point.valid, 0);
  return (
    <figure class="usage">
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label="verifications over time">
        {points.map((point, index) => {
          const all = (point.total / max) * HEIGHT;
          const ok = (point.valid / max) * HEIGHT;
          return (
            <g key={point.time}>
              <rect class="refused" x={index * step} y={HEIGHT - all} width={Math.max(1, step - 1)} height={all} />
              <rect class="valid" x={index * step} y={HEIGHT - ok} width={Math.max(1, step - 1)} height={ok} />
            </g>
          );
        })}
      </svg>
      <figcaption>
        <span data-testid="usage-total">{total}</span> verifications, <span data-testid="usage-valid">{valid}</span> valid
      </figcaption>
    </figure>
  );
}
