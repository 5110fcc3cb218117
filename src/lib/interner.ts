/**
 * Equal values kept once: `get(id, make)` answers the value remembered under `id`, making it on first use. At most
 * `capacity` are remembered; a full interner starts again empty, so a flood of distinct values costs a bounded map
 * and values handed out before stay as they are (only their sharing with later ones is lost). Values must be
 * immutable: every holder shares them.
 */
export class Interner<T> {
  private readonly known = new Map<string, T>();
  private readonly capacity: number;

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  get(id: string, make: (id: string) => T): T {
    let value = this.known.get(id);
    if (value === undefined) {
      value = make(id);
      if (this.known.size >= this.capacity) this.known.clear();
      this.known.set(id, value);
    }
    return value;
  }
}
