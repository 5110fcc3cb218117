import { useState } from "preact/hooks";

/** The pages of a cursor-paginated list seen so far: the cursor of each, and the next one the last answer gave. */
export interface CursorPages {
  /** The cursor of the page shown (undefined for the first). */
  current: string | undefined;
  next: string | undefined;
  setNext(cursor: string | undefined): void;
  /** Back to the first page (a new filter or search). */
  restart(): void;
  hasPrevious: boolean;
  /** The page shown, counted from 1. */
  number: number;
  /** Moves to the previous page and gives its cursor. */
  back(): string | undefined;
  /** Moves to the next page and gives its cursor. */
  forward(): string | undefined;
}

export function useCursorPages(): CursorPages {
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const [next, setNext] = useState<string | undefined>(undefined);
  return {
    current: cursors[cursors.length - 1],
    next,
    setNext,
    restart: () => setCursors([undefined]),
    hasPrevious: cursors.length > 1,
    number: cursors.length,
    // Until the page asked for is answered, its own next cursor is unknown: Next waits for it.
    back: () => {
      const previous = cursors.slice(0, -1);
      setCursors(previous);
      setNext(undefined);
      return previous[previous.length - 1];
    },
    forward: () => {
      setCursors([...cursors, next]);
      setNext(undefined);
      return next;
    },
  };
}

/** Previous and next page buttons of a cursor-paginated list, and the page shown; `load` shows the page of a cursor. */
export function Pager(props: { label: string; pages: CursorPages; load: (cursor: string | undefined) => void }) {
  const { pages, load } = props;
  if (!pages.hasPrevious && pages.next === undefined) return null;
  return (
    <nav aria-label={props.label} class="actions pager">
      <button type="button" disabled={!pages.hasPrevious} onClick={() => load(pages.back())}>
        Previous page
      </button>
      <span class="muted">Page {pages.number}</span>
      <button type="button" disabled={pages.next === undefined} onClick={() => load(pages.forward())}>
        Next page
      </button>
    </nav>
  );
}
