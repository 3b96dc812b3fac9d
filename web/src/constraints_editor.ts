// The editor of the compute constraints: an ordered "prefer" list and a "never" list of backend names,
// saved with PUT /api/compute (docs/api.md). Contract: only the lists the user changed are sent (a field
// left out keeps its saved value, so a saved name this server does not know is not re-sent needlessly);
// the server validates (unknown names, duplicates, a name in both lists) and its 400 message is shown
// as it is, in #compute-save-error. On success `onSaved` gets the server's new document.
import { api, type ComputeConstraints, type ComputeDoc } from "./api";
import { describeError, el } from "./dom";

function same(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function button(label: string, title: string, onClick: () => void, attrs: Record<string, string> = {}): HTMLButtonElement {
  const b = el("button", { type: "button", title, ...attrs }, label);
  b.addEventListener("click", onClick);
  return b;
}

export function constraintsEditor(doc: ComputeDoc, onSaved: (doc: ComputeDoc, message: string) => void): HTMLElement {
  const saved: ComputeConstraints = { prefer: [...doc.constraints.prefer], never: [...doc.constraints.never] };
  const state: ComputeConstraints = { prefer: [...saved.prefer], never: [...saved.never] };
  // Names offered: the backends this server knows (the only ones PUT accepts), then any saved name.
  const names = [...new Set([...doc.backends.map((b) => b.name), ...saved.prefer, ...saved.never])];

  const root = el("div", { class: "constraints-editor", id: "constraints-editor" });
  const preferList = el("ol", { class: "name-list", id: "prefer-list" });
  const neverList = el("ul", { class: "name-list", id: "never-list" });
  const preferAdd = el("select", { id: "prefer-add", "aria-label": "backend to prefer" });
  const neverAdd = el("select", { id: "never-add", "aria-label": "backend never to use" });
  const save = button("Save", "save the constraints to the settings file", () => void doSave(), { id: "compute-save" });
  const revert = button("Revert", "undo the unsaved changes", () => {
    state.prefer = [...saved.prefer];
    state.never = [...saved.never];
    error.hidden = true;
    draw();
  }, { id: "compute-revert" });
  const auto = button("Clear (auto)", "remove every constraint: the planner picks by cost", () => {
    state.prefer = [];
    state.never = [];
    draw();
  }, { id: "compute-auto" });
  const status = el("span", { class: "save-status", id: "compute-save-status" });
  const warning = el("p", { class: "hint", id: "compute-overlap" });
  const error = el("p", { class: "save-error", id: "compute-save-error", role: "alert" });
  error.hidden = true;

  const listItem = (list: string[], i: number, ordered: boolean): HTMLLIElement => {
    const name = list[i];
    const li = el("li", { "data-backend": name }, el("span", { class: "name" }, name));
    const move = (d: number): void => {
      [list[i], list[i + d]] = [list[i + d], list[i]];
      draw();
    };
    if (ordered) {
      const up = button("↑", `prefer ${name} earlier`, () => move(-1), { class: "up" });
      const down = button("↓", `prefer ${name} later`, () => move(1), { class: "down" });
      up.disabled = i === 0;
      down.disabled = i === list.length - 1;
      li.append(up, down);
    }
    li.append(
      button("×", `remove ${name}`, () => {
        list.splice(i, 1);
        draw();
      }, { class: "remove" }),
    );
    return li;
  };

  const fillSelect = (select: HTMLSelectElement, taken: string[]): void => {
    select.replaceChildren(el("option", { value: "" }, "add a backend…"));
    for (const n of names) if (!taken.includes(n)) select.append(el("option", { value: n }, n));
    select.disabled = select.options.length === 1;
  };

  function draw(): void {
    preferList.replaceChildren(...state.prefer.map((_, i) => listItem(state.prefer, i, true)));
    neverList.replaceChildren(...state.never.map((_, i) => listItem(state.never, i, false)));
    if (!state.prefer.length) preferList.append(el("li", { class: "empty" }, "none: cost decides"));
    if (!state.never.length) neverList.append(el("li", { class: "empty" }, "none: every available backend may run"));
    fillSelect(preferAdd, state.prefer);
    fillSelect(neverAdd, state.never);
    const dirty = !same(state.prefer, saved.prefer) || !same(state.never, saved.never);
    save.disabled = !dirty;
    revert.disabled = !dirty;
    auto.disabled = !state.prefer.length && !state.never.length;
    root.dataset.dirty = String(dirty);
    if (dirty) status.textContent = "unsaved changes";
    else if (status.textContent === "unsaved changes") status.textContent = "";
    // The server refuses a name in both lists; say so before saving, but let the server decide.
    const both = state.prefer.filter((n) => state.never.includes(n));
    warning.textContent = both.length ? `${both.join(", ")} is both preferred and never used: the server will refuse this.` : "";
    warning.hidden = !both.length;
  }

  const onAdd = (select: HTMLSelectElement, list: () => string[]): void => {
    select.addEventListener("change", () => {
      if (select.value) list().push(select.value);
      draw();
    });
  };
  onAdd(preferAdd, () => state.prefer);
  onAdd(neverAdd, () => state.never);

  async function doSave(): Promise<void> {
    const body: Partial<ComputeConstraints> = {};
    if (!same(state.prefer, saved.prefer)) body.prefer = state.prefer;
    if (!same(state.never, saved.never)) body.never = state.never;
    save.disabled = true;
    error.hidden = true;
    status.textContent = "saving…";
    root.dataset.saving = "true";
    try {
      const next = await api.putCompute(body);
      onSaved(next, `saved to ${next.settings_file}`);
    } catch (e) {
      error.textContent = `Not saved: ${describeError(e)}`;
      error.hidden = false;
      status.textContent = "";
      save.disabled = false;
    } finally {
      delete root.dataset.saving;
    }
  }

  root.append(
    el(
      "div",
      { class: "constraint-lists" },
      el("div", {}, el("h4", {}, "Prefer (in order)"), preferList, preferAdd),
      el("div", {}, el("h4", {}, "Never use"), neverList, neverAdd),
    ),
    warning,
    el("div", { class: "toolbar" }, save, revert, auto, status),
    error,
  );
  draw();
  return root;
}
