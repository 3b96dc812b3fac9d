// Small DOM helpers and the page's error banner (errors are always shown, never a blank screen).
import { ApiError } from "./api";

/** A DOM element with attributes and children. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  e.append(...children);
  return e;
}

export function describeError(e: unknown): string {
  if (e instanceof ApiError) return `${e.message} (${e.url.split("?")[0]})`;
  if (e instanceof Error) return e.message;
  return String(e);
}

/** Shows an error in the banner at the top of the page (and the console). */
export function showError(e: unknown, context = ""): void {
  const text = (context ? context + ": " : "") + describeError(e);
  console.error(text, e);
  const box = document.getElementById("error");
  if (!box) return;
  const line = el("div", { class: "error-line" }, el("span", { class: "error-text" }, text));
  const close = el("button", { type: "button", title: "dismiss" }, "×");
  close.addEventListener("click", () => {
    line.remove();
    if (!box.childElementCount) box.hidden = true;
  });
  line.prepend(close);
  box.append(line);
  box.hidden = false;
}

export function clearErrors(): void {
  const box = document.getElementById("error");
  if (box) {
    box.replaceChildren();
    box.hidden = true;
  }
}
