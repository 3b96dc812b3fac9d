"""One request, one verdict in every face. Each bad request of the faces probe (issue 43) goes through the CLI
(exit 2), the server (400) and the Python module (tm.InvalidArgument) where that face takes the parameter, and
each refusal names the parameter; where a value is refused by its declaration (stem/runs/request_params.cpp), the
message after the parameter's spelling is the same text in every face. A second test checks the declaration
against the faces: every declared CLI flag is in the command's --help, every declared Python keyword is in the
function's signature, and every declared query parameter is one the server reads (a bad value of it is refused
naming it, not as unknown)."""
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse

import numpy as np
import pytest

import tensormorph as tm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cli"))


def _env():
    # The binary carries its own sanitizer runtime: the interpreter's preload is not passed on (conftest.Cli).
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A demo acquisition (8 x 8 scan, 32 x 32 frames) and a small checkpoint, served; the CLI beside them."""
    binary = os.environ.get("TM_BIN")
    if not binary:
        pytest.skip("TM_BIN is not set (run through ctest)")
    os.environ["TM_BIN"] = binary
    from test_serve import Server, private_env  # noqa: E402 (tests/cli, which reads TM_BIN)
    from safetensors_write import write_safetensors  # noqa: E402 (tests/tools, on the path through conftest)

    tmp = str(tmp_path_factory.mktemp("schema"))
    env = private_env(tmp)
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([binary, "stem", "demo", "--out", os.path.join(tmp, "acq"), "--scan", "8,8", "--detector", "32"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    master = os.path.join(tmp, "acq", "demo_master.h5")
    small = os.path.join(tmp, "small.safetensors")
    write_safetensors(small, [("w", np.arange(64, dtype=np.float32).reshape(8, 8))])
    server = Server([small, master], env)
    yield {"bin": binary, "env": env, "tmp": tmp, "master": master, "server": server}
    code, _ = server.stop()
    assert code == 0, code


def cli(world, *args):
    r = subprocess.run([world["bin"], *args], capture_output=True, text=True, env=world["env"], timeout=300)
    prefix = "tensormorph: error: "
    first = r.stderr.splitlines()[0] if r.stderr else ""
    return r.returncode, first[len(prefix):] if first.startswith(prefix) else first


def ask(world, method, path, body=None):
    s = world["server"]
    c = http.client.HTTPConnection(s.host, s.port, timeout=120)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        c.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw).get("error", "")
        except ValueError:
            return r.status, raw[:200].decode("latin-1")
    finally:
        c.close()


def q(**params):
    return urllib.parse.urlencode(params)


def detail(message):
    """The text after the parameter's spelling: 'expected …, got …' (the part every face shares)."""
    return message.split(": ", 1)[1] if ": " in message else message


# (case, parameter, CLI args after `stem`, HTTP path under the acquisition, Python call or None)
# {M}: the master file; {OUT}: an output path. Python None: the module does not take the parameter (the movie,
# the calibration overrides of ssb) or cannot be given the text (a float keyword is never a string).
VALUE_CASES = [
    ("ssb c12 < 0", "c12", ["ssb", "{M}", "-o", "{OUT}.npy", "--C12", "-1"], "ssb?" + q(c12="-1"),
     lambda m: tm.stem.ssb(m, C12=-1)),
    ("mask inner < 0", "inner", ["mask", "{M}", "-o", "{OUT}.npy", "--inner", "-1", "--outer", "5"],
     "products/mask?" + q(inner="-1", outer="5"), lambda m: tm.stem.product(m, "mask", inner=-1, outer=5)),
    ("movie inner < 0", "inner", ["movie", "{M}", "-o", "{OUT}.gif", "--sweep", "outer", "--from", "1", "--to", "5", "--inner", "-1"],
     "movie?" + q(sweep="outer", **{"from": "1"}, to="5", inner="-1"), None),
    ("mask inner nan", "inner", ["mask", "{M}", "-o", "{OUT}.npy", "--inner", "nan", "--outer", "5"],
     "products/mask?" + q(inner="nan", outer="5"), lambda m: tm.stem.product(m, "mask", inner=float("nan"), outer=5)),
    ("hexadecimal", "inner", ["mask", "{M}", "-o", "{OUT}.npy", "--inner", "0x10", "--outer", "20"],
     "products/mask?" + q(inner="0x10", outer="20"), None),
    ("plus sign", "inner", ["mask", "{M}", "-o", "{OUT}.npy", "--inner", "+1", "--outer", "20"],
     "products/mask?" + q(inner="+1", outer="20"), None),
    ("leading space", "inner", ["mask", "{M}", "-o", "{OUT}.npy", "--inner", " 1", "--outer", "20"],
     "products/mask?" + q(inner=" 1", outer="20"), None),
    ("semi-angle 1e308", "semiangle_mrad", ["ssb", "{M}", "-o", "{OUT}.npy", "--semiangle-mrad", "1e308"],
     "ssb?" + q(semiangle_mrad="1e308"), None),
    ("max abc", "max", None, "products/mean-dp?" + q(max="abc"), lambda m: tm.stem.product(m, "mean-dp", max_pattern="abc")),
    ("transpose empty", "transpose", None, "products/dpc?transpose=", lambda m: tm.stem.product(m, "dpc", transpose="")),
    ("masked nan", "masked", None, "frame?" + q(row="0", col="0", masked="nan"), None),
]


@pytest.mark.parametrize("case", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_a_bad_value_gets_the_same_refusal_in_every_face(world, case):
    _, param, cli_args, http_path, py_call = case
    messages = []
    if cli_args:
        args = [a.replace("{M}", world["master"]).replace("{OUT}", os.path.join(world["tmp"], "out")) for a in cli_args]
        code, message = cli(world, "stem", *args)
        assert code == 2, (code, message)
        assert message.lower().startswith("--" + param.replace("_", "-")), message
        messages.append(message)
    status, message = ask(world, "GET", "/api/acquisitions/a0/" + http_path)
    assert status == 400, (status, message)
    assert message.startswith("parameter '%s'" % param), message
    messages.append(message)
    if py_call:
        with pytest.raises(tm.InvalidArgument) as e:
            py_call(world["master"])
        messages.append(str(e.value))
    assert "expected" in detail(messages[0]), messages
    assert len({detail(m) for m in messages}) == 1, messages  # one verdict, one text


# The tensor views (render/tensors/view_params.cpp): (case, parameter, CLI args, HTTP path, Python call or None).
# {S}: the served checkpoint; {OUT}: an output path.
RENDER = ["render", "{S}", "w", "-o", "{OUT}.png"]
TENSOR_CASES = [
    ("render level 64", "level", RENDER + ["--level", "64"], "/api/render/0/w.png?level=64", lambda c: c.render("w", level=64)),
    ("render level hexadecimal", "level", RENDER + ["--level", "0x1"], "/api/render/0/w.png?level=0x1", None),
    ("render stat median", "stat", RENDER + ["--stat", "median"], "/api/render/0/w.png?stat=median",
     lambda c: c.render("w", stat="median")),
    ("cells stat median", "stat", None, "/api/cells/0/w?stat=median", None),
    ("render transform exp", "transform", RENDER + ["--transform", "exp"], "/api/render/0/w.png?transform=exp",
     lambda c: c.render("w", transform="exp")),
    ("log floor 0", "log_floor", RENDER + ["--log-floor", "0"], "/api/render/0/w.png?log_floor=0",
     lambda c: c.render("w", log_floor=0)),
    ("log floor nan", "log_floor", RENDER + ["--log-floor", "nan"], "/api/render/0/w.png?log_floor=nan",
     lambda c: c.render("w", log_floor=float("nan"))),
    ("limits one number", "limits", RENDER + ["--limits", "1"], "/api/render/0/w.png?limits=1", None),
    ("limits reversed", "limits", RENDER + ["--limits", "2,1"], "/api/render/0/w.png?limits=2,1", lambda c: c.render("w", limits=(2, 1))),
    ("limits infinite", "limits", RENDER + ["--limits", "0,inf"], "/api/render/0/w.png?limits=0,inf",
     lambda c: c.render("w", limits=(0, float("inf")))),
    ("tile level 64", "level", ["tile", "{S}", "w", "--level", "64", "--tile", "0,0"], "/api/tiles/0/w?level=64&x=0&y=0",
     lambda c: c.tile("w", 64, 0, 0)),
    ("tile format png", "format", None, "/api/tiles/0/w?level=0&x=0&y=0&format=png", None),
    ("outliers top 300", "top", None, "/api/outliers/0/w?top=300", None),
    ("profile row plus", "row", None, "/api/profile/0/w?row=+1", None),
]


@pytest.mark.parametrize("case", TENSOR_CASES, ids=[c[0] for c in TENSOR_CASES])
def test_a_bad_tensor_view_value_gets_the_same_refusal_in_every_face(world, case):
    _, param, cli_args, http_path, py_call = case
    small = os.path.join(world["tmp"], "small.safetensors")
    messages = []
    if cli_args:
        args = [a.replace("{S}", small).replace("{OUT}", os.path.join(world["tmp"], "out")) for a in cli_args]
        code, message = cli(world, *args)
        assert code == 2, (code, message)
        assert message.startswith("--" + param.replace("_", "-")), message
        messages.append(message)
    status, message = ask(world, "GET", http_path)
    assert status == 400, (status, message)
    assert message.startswith("parameter '%s'" % param), message
    messages.append(message)
    if py_call:
        with pytest.raises(tm.InvalidArgument) as e:
            py_call(tm.open(small))
        messages.append(str(e.value))
    assert len({detail(m) for m in messages}) == 1, messages  # one verdict, one text


def test_an_unknown_tensor_view_parameter_is_refused_naming_it(world):
    for path, op in [("/api/render/0/w.png?bogus=1", "tensor.render"), ("/api/tiles/0/w?level=0&x=0&y=0&stat=mean", "tensor.tile"),
                     ("/api/cells/0/w?transform=log", "tensor.cells"), ("/api/outliers/0/w?row=1", "tensor.outliers"),
                     ("/api/profile/0/w?row=1&top=2", "tensor.profile")]:
        status, message = ask(world, "GET", path)
        assert status == 400 and "not a parameter of " + op in message, (path, message)
    status, message = ask(world, "GET", "/api/render/0/w.png?" + q(level="0", stat="max", transform="signed-log", limits="-1e1,2.5",
                                                                   log_floor="1e-9", colormap="gray", format="json"))
    assert status == 200, message


def test_a_switch_given_a_value_on_the_cli_is_refused_naming_it(world):
    code, message = cli(world, "stem", "mean-dp", world["master"], "-o", os.path.join(world["tmp"], "m.npy"), "--max=abc")
    assert code == 2 and "--max" in message, message


def test_a_parameter_given_twice_is_refused(world):
    status, message = ask(world, "GET", "/api/acquisitions/a0/products/bf?" + "scan_shape=8,8&scan_shape=8,8")
    assert status == 400 and "'scan_shape' is given more than once" in message, message
    status, message = ask(world, "GET", "/api/cells/0/w?stat=mean&stat=mean")
    assert status == 400 and "'stat' is given more than once" in message, message
    code, message = cli(world, "stem", "bf", world["master"], "-o", os.path.join(world["tmp"], "b.npy"),
                        "--scan-shape", "8,8", "--scan-shape", "8,8")
    assert code == 2 and "--scan-shape" in message, message


def test_an_unknown_parameter_is_refused_naming_it(world):
    status, message = ask(world, "GET", "/api/acquisitions/a0/products/bf?bogus=1")
    assert status == 400 and message.startswith("parameter 'bogus': not a parameter of stem.product"), message
    status, message = ask(world, "GET", "/api/acquisitions/a0/ssb?C10=5")  # the query spells it c10
    assert status == 400 and message.startswith("parameter 'C10': not a parameter of stem.ssb"), message
    code, message = cli(world, "stem", "bf", world["master"], "-o", os.path.join(world["tmp"], "b.npy"), "--bogus")
    assert code == 2 and "--bogus" in message, message
    acq = tm.stem.open(world["master"])
    with pytest.raises(tm.InvalidArgument, match=r"^bogus: not a parameter of stem\.product"):
        acq.bf(bogus=1)
    with pytest.raises(tm.InvalidArgument, match=r"^c10: not a parameter of stem\.ssb \(it takes C10, C12"):
        acq.ssb(c10=5)  # Python spells it C10


def test_an_unknown_approximation_step_is_refused_naming_it(world):
    code, message = cli(world, "stem", "ssb", world["master"], "-o", os.path.join(world["tmp"], "s.npy"), "--allow-approx", "zzz")
    assert code == 2 and message.startswith("--allow-approx: unknown approximation step 'zzz'"), message
    with pytest.raises(tm.InvalidArgument) as e:
        tm.stem.ssb(world["master"], allow_approx="zzz")
    assert str(e.value).startswith("allow_approx: unknown approximation step 'zzz'")
    assert detail(str(e.value)) == detail(message)
    status, message = ask(world, "PUT", "/api/compute", {"allow_approx": ["zzz"]})
    assert status == 400 and "'allow_approx': unknown step 'zzz'" in message, message


def test_a_good_request_still_passes_in_every_face(world):
    # The strict grammar takes what the page and scripts send: exponents, fractions, negative numbers.
    status, message = ask(world, "GET", "/api/acquisitions/a0/products/mask?" + q(inner="1.5e0", outer="12.25"))
    assert status == 200, message
    values, _ = tm.stem.product(world["master"], "mask", inner=1.5, outer=12.25)
    code, message = cli(world, "stem", "mask", world["master"], "-o", os.path.join(world["tmp"], "ok.npy"),
                        "--inner", "1.5e0", "--outer", "12.25")
    assert code == 0, message
    assert np.array_equal(np.load(os.path.join(world["tmp"], "ok.npy")), values)


@pytest.mark.parametrize("operation,command,function", [
    ("stem.product", "mask", "product"), ("stem.ssb", "ssb", "ssb"), ("stem.movie", "movie", None)])
def test_the_declaration_matches_every_face(world, operation, command, function):
    params = tm.stem.parameters(operation)
    assert params, operation
    r = subprocess.run([world["bin"], "stem", command, "--help"], capture_output=True, text=True, env=world["env"], timeout=60)
    assert r.returncode == 0, r.stderr
    flags = set(re.findall(r"(--[A-Za-z0-9][A-Za-z0-9-]*)", r.stdout))
    for p in params:
        if p["cli"]:
            assert p["cli"] in flags, (operation, p["cli"])
    if function:
        signature = getattr(tm.stem, function).__doc__.splitlines()[0]
        keywords = set(re.findall(r"(\w+):", signature))
        declared = {p["name"] for p in params if p["name"]}
        assert declared <= keywords, (operation, sorted(declared - keywords))
        assert keywords - {"path", "kind"} <= declared, (operation, sorted(keywords - {"path", "kind"} - declared))
    path, base = {"stem.product": ("products/mask", {"inner": "1", "outer": "5"}), "stem.ssb": ("ssb", {}),
                  "stem.movie": ("movie", {"sweep": "outer", "from": "1", "to": "5"})}[operation]
    for p in params:
        if p["http"] and p["kind"] != "text":
            query = dict(base, **{p["http"]: "{bad}"})
            status, message = ask(world, "GET", "/api/acquisitions/a0/%s?%s" % (path, q(**query)))
            assert status == 400 and message.startswith("parameter '%s'" % p["http"]), (p["http"], message)
            assert "not a parameter" not in message, message
