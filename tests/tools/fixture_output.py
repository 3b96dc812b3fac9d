"""The last step of the torch fixture generators: expected.json written (sorted keys, one space of indent) and
every file written listed with its size."""
import json
import os


def finish(out, expected, width=50):
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    for root, _, files in sorted(os.walk(out)):
        for name in sorted(files):
            path = os.path.join(root, name)
            print("%-*s %6d bytes" % (width, os.path.relpath(path, out), os.path.getsize(path)))
