import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import logo from "./favicon.svg";

export interface NavItem {
  href: string;
  label: string;
  current: boolean;
}

/**
 * The one layout of keygate's pages (dashboard and portal): a side bar (brand, navigation, account) beside the page;
 * on a narrow screen a top bar whose Menu button opens the navigation (ui/base.css). The menu closes when a link is
 * followed, so the page it opens is in view.
 */
export function Shell(props: {
  brand: ComponentChildren;
  nav: readonly NavItem[];
  account: ComponentChildren;
  children: ComponentChildren;
}) {
  const [open, setOpen] = useState(false);
  const current = props.nav.find((item) => item.current)?.href;
  useEffect(() => setOpen(false), [current]);
  return (
    <div class="shell">
      <header class={open ? "sidebar open" : "sidebar"}>
        <div class="brand">{props.brand}</div>
        <button type="button" class="menu-button" aria-expanded={open} aria-controls="main-navigation" onClick={() => setOpen(!open)}>
          Menu
        </button>
        <nav id="main-navigation" aria-label="Main">
          <ul>
            {props.nav.map((item) => (
              <li key={item.href}>
                <a href={item.href} aria-current={item.current ? "page" : undefined} onClick={() => setOpen(false)}>
                  {item.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="account">{props.account}</div>
      </header>
      <main class="page">{props.children}</main>
    </div>
  );
}

/** keygate's mark and name, as the dashboard's side bar and sign-in page show them. */
export function KeygateBrand() {
  return (
    <>
      <img src={logo} alt="" width={28} height={28} />
      <span>keygate</span>
    </>
  );
}

/**
 * A wide table's scroller: the table scrolls inside its card rather than widen the page. It takes the focus, so
 * that a keyboard can scroll it (WCAG 2.1.1; axe's scrollable-region-focusable), and is named after its table.
 */
export function TableScroll(props: { label: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scroller the keyboard must reach to scroll it
    <section class="table-scroll" aria-label={`${props.label} (table)`} tabIndex={0}>
      {props.children}
    </section>
  );
}
