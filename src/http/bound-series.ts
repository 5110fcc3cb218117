import type { Registry } from "prom-client";

/** What prom-client's registries read of a series when scraped (text, JSON, added up across workers). */
interface SeriesValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/**
 * A counter or histogram of the request path, served through a prom-client registry like prom-client's own.
 * prom-client builds a string key from a call's labels object on every call (several per request); here each
 * combination of label values is bound once to a child that a call finds with a few map lookups and counts in
 * plain numbers. Label values are bounded (names, codes, statuses), so the children are too.
 */
abstract class BoundSeries<Child> {
  readonly aggregator = "sum";
  abstract readonly type: "counter" | "histogram";
  readonly name: string;
  readonly help: string;
  private readonly labelNames: readonly string[];
  private readonly children = new Map<string, Map<string, Map<string, Child>>>();
  private readonly bound: { labels: Record<string, string>; child: Child }[] = [];

  constructor(options: { name: string; help: string; labelNames: readonly string[]; registry: Registry }) {
    if (options.labelNames.length > 3) throw new Error(`${options.name}: a bound series has at most three labels`);
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    options.registry.registerMetric(this as never);
  }

  /** The child of these label values, in the order of the label names ("" past the last name). */
  protected child(a: string, b = "", c = ""): Child {
    let byB = this.children.get(a);
    if (byB === undefined) {
      byB = new Map();
      this.children.set(a, byB);
    }
    let byC = byB.get(b);
    if (byC === undefined) {
      byC = new Map();
      byB.set(b, byC);
    }
    let child = byC.get(c);
    if (child === undefined) {
      child = this.newChild();
      byC.set(c, child);
      const values = [a, b, c];
      this.bound.push({ labels: Object.fromEntries(this.labelNames.map((name, index) => [name, values[index] as string])), child });
    }
    return child;
  }

  protected abstract newChild(): Child;
  protected abstract valuesOf(labels: Record<string, string>, child: Child): SeriesValue[];

  /** The series as prom-client's registries read them. */
  get(): { name: string; help: string; type: string; aggregator: string; values: SeriesValue[] } {
    const values = this.bound.flatMap(({ labels, child }) => this.valuesOf(labels, child));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.children.clear();
    this.bound.length = 0;
  }
}

/** A counter whose label values are bound once (see BoundSeries). */
export class BoundCounter extends BoundSeries<{ value: number }> {
  readonly type = "counter";

  inc(a: string, b?: string, c?: string): void {
    this.child(a, b, c).value += 1;
  }

  protected newChild(): { value: number } {
    return { value: 0 };
  }

  protected valuesOf(labels: Record<string, string>, child: { value: number }): SeriesValue[] {
    return [{ labels, value: child.value }];
  }
}

interface HistogramChild {
  /** Observations per bucket (not cumulative); the last counts those above every bound. */
  buckets: number[];
  sum: number;
  count: number;
}

/** A histogram whose label values are bound once (see BoundSeries). */
export class BoundHistogram extends BoundSeries<HistogramChild> {
  readonly type = "histogram";
  private readonly bounds: readonly number[];

  constructor(options: { name: string; help: string; labelNames: readonly string[]; buckets: readonly number[]; registry: Registry }) {
    super(options);
    this.bounds = options.buckets;
  }

  /** `value` observed under the label values that come after it. */
  observe(value: number, a: string, b?: string, c?: string): void {
    const child = this.child(a, b, c);
    const bounds = this.bounds;
    let bucket = 0;
    while (bucket < bounds.length && value > (bounds[bucket] as number)) bucket++;
    (child.buckets[bucket] as number)++;
    child.sum += value;
    child.count += 1;
  }

  protected newChild(): HistogramChild {
    return { buckets: new Array<number>(this.bounds.length + 1).fill(0), sum: 0, count: 0 };
  }

  protected valuesOf(labels: Record<string, string>, child: HistogramChild): SeriesValue[] {
    const bucketName = `${this.name}_bucket`;
    let cumulative = 0;
    const values: SeriesValue[] = this.bounds.map((bound, index) => {
      cumulative += child.buckets[index] as number;
      return { labels: { le: bound, ...labels }, value: cumulative, metricName: bucketName };
    });
    values.push(
      { labels: { le: "+Inf", ...labels }, value: child.count, metricName: bucketName },
      { labels, value: child.sum, metricName: `${this.name}_sum` },
      { labels, value: child.count, metricName: `${this.name}_count` },
    );
    return values;
  }
}
