import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface Series {
  label: string;
  values: (number | null)[];
  stroke?: string;
  dash?: number[];
}

/**
 * Lines over time, drawn by uPlot across the whole range asked for (the last `seconds`, not just the buckets that
 * have rows): a time axis, a value axis labelled with its `unit`, and a legend naming each series. Its accessible
 * name is its title and series; the tables beside the charts give the numbers as text.
 */
export function TimeChart(props: { title: string; times: number[]; series: Series[]; seconds: number; unit: string }) {
  const container = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = container.current;
    if (!element) return;
    const chart = new uPlot(
      {
        width: Math.max(280, element.clientWidth),
        height: 260,
        scales: { x: { time: true, range: (): uPlot.Range.MinMax => [Date.now() / 1000 - props.seconds, Date.now() / 1000] } },
        series: [
          { label: "Time" },
          ...props.series.map((series) => ({
            label: series.label,
            stroke: series.stroke ?? "#333",
            width: 2,
            points: { show: true },
            ...(series.dash ? { dash: series.dash } : {}),
          })),
        ],
        axes: [{ label: "Time (local)" }, { label: props.unit }],
      },
      [props.times.map((time) => time / 1000), ...props.series.map((series) => series.values)] as uPlot.AlignedData,
      element,
    );
    return () => chart.destroy();
  }, [props.times, props.series, props.seconds, props.unit]);
  const names = props.series.map((series) => series.label).join(", ");
  return (
    <figure>
      <figcaption>{props.title}</figcaption>
      <div ref={container} role="img" aria-label={`${props.title}: ${names || "no data"}`} class="chart" />
    </figure>
  );
}
