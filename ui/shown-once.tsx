import { useEffect, useRef, useState } from "preact/hooks";

/**
 * A secret shown once (a new key, a webhook secret): the warning, the value, Copy and Done. It scrolls itself into
 * view and takes the focus when it appears, so that it is never shown out of sight of the button that made it.
 */
export function ShownOnce(props: { label: string; value: string; onDismiss: () => void; testId?: string }) {
  const box = useRef<HTMLElement>(null);
  const [copied, setCopied] = useState(false);
  useEffect(() => {
    box.current?.scrollIntoView({ block: "center" });
    box.current?.focus({ preventScroll: true });
  }, [props.value]);
  return (
    <section ref={box} class="shown-once" aria-label={props.label} tabIndex={-1} data-testid={props.testId}>
      <p>
        <strong>Copy it now: this {props.label.toLowerCase()} is shown once and cannot be shown again.</strong>
      </p>
      <output aria-label={props.label} data-testid={props.testId ? `${props.testId}-value` : undefined}>
        {props.value}
      </output>
      <div class="actions">
        <button type="button" onClick={() => navigator.clipboard?.writeText(props.value).then(() => setCopied(true))}>
          {copied ? "Copied" : "Copy"}
        </button>
        <button type="button" onClick={props.onDismiss}>
          Done
        </button>
      </div>
    </section>
  );
}
