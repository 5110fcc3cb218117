import type { ComponentChildren } from "preact";
import { useEffect, useId, useRef, useState } from "preact/hooks";

/**
 * A destructive action behind a confirmation: the button opens a modal dialog that names what is lost
 * (`consequence`), with Cancel (focused first, so Enter does not destroy) and the action (`confirm`, in red).
 * Escape cancels. `onConfirm` runs once the dialog is closed.
 */
export function ConfirmButton(props: {
  /** The button's words, and its accessible name when `name` is not given. */
  label: string;
  name?: string;
  title: string;
  consequence: ComponentChildren;
  confirm: string;
  onConfirm: () => unknown;
  /** Extra controls inside the dialog (a grace period, say), above its buttons. */
  children?: ComponentChildren;
  class?: string;
}) {
  const [open, setOpen] = useState(false);
  const dialog = useRef<HTMLDialogElement>(null);
  const cancel = useRef<HTMLButtonElement>(null);
  const id = useId();
  useEffect(() => {
    const element = dialog.current;
    if (!element) return;
    if (open && !element.open) {
      element.showModal();
      cancel.current?.focus();
    }
    if (!open && element.open) element.close();
  }, [open]);
  return (
    <>
      <button type="button" class={props.class} aria-label={props.name} aria-haspopup="dialog" onClick={() => setOpen(true)}>
        {props.label}
      </button>
      {open && (
        <dialog
          ref={dialog}
          class="confirm"
          aria-labelledby={`${id}-title`}
          aria-describedby={`${id}-consequence`}
          onClose={() => setOpen(false)}
        >
          <h2 id={`${id}-title`}>{props.title}</h2>
          <div id={`${id}-consequence`}>{props.consequence}</div>
          {props.children}
          <div class="actions">
            <button type="button" ref={cancel} onClick={() => setOpen(false)}>
              Cancel
            </button>
            <button
              type="button"
              class="danger"
              onClick={() => {
                setOpen(false);
                props.onConfirm();
              }}
            >
              {props.confirm}
            </button>
          </div>
        </dialog>
      )}
    </>
  );
}
