"""`tensormorph stem movie`: GIF frames decoded back equal the PNG renders of the same products (`stem mean-dp
--scan-region` for patterns along a line, `stem mask --inner/--outer` for a detector sweep) above a caption strip
with the frame's label and scale bar; the MP4 is an ISO-BMFF file whose H.264 track has the frames and size; bad
input is refused with clear messages and the usual exit codes."""
import os
import shutil
import struct
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cli_harness import figure_body, run  # noqa: E402

try:
    import numpy as np
    from PIL import Image, ImageSequence
except ImportError:  # pragma: no cover
    np = None
try:
    import h5py
except ImportError:  # pragma: no cover
    h5py = None

SCAN, K, CAPTION = 8, 32, 22


def gif_frames(path):
    with Image.open(path) as im:
        info = dict(im.info)
        return [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(im)], info


def png_rgba(path):
    """The render of a CLI PNG without its frame (title and axes): its pixels left of the colour bar's label panel
    (render/colour_bar_ticks.h), which is what a movie frame shows above its caption."""
    with Image.open(path) as im:
        x, _, _, _ = map(int, im.text["tensormorph:cells_box"].split(","))
        width = int(im.text["tensormorph:labels_box"].split(",")[0]) - x
        return figure_body(im)[:, :width]


def as_frame(png, paper):
    """What a movie frame shows of a PNG render: its opaque pixels, and the paper colour where it is transparent."""
    return np.where(png[:, :, 3:] == 255, png[:, :, :3], np.array(paper, dtype=np.uint8))


def boxes(data, start, end):
    """(type, payload start, payload end) of the ISO-BMFF boxes in data[start:end]."""
    out, i = [], start
    while i + 8 <= end:
        size, kind = struct.unpack(">I4s", data[i:i + 8])
        header = 8
        if size == 1:
            size, header = struct.unpack(">Q", data[i + 8:i + 16])[0], 16
        elif size == 0:
            size = end - i
        out.append((kind.decode("latin-1"), i + header, i + size))
        i += size
    return out


def find(data, path, start=0, end=None):
    """The payload range of the first box along path (e.g. ["moov", "trak", "mdia"])."""
    end = len(data) if end is None else end
    for name in path:
        match = [b for b in boxes(data, start, end) if b[0] == name]
        if not match:
            return None
        _, start, end = match[0]
    return start, end


def mp4_video(path):
    """(first box type, sample count, width, height, codec fourcc) of the MP4's first track."""
    with open(path, "rb") as f:
        data = f.read()
    first = boxes(data, 0, len(data))[0][0]
    stbl = find(data, ["moov", "trak", "mdia", "minf", "stbl"])
    s, _ = find(data, ["stsz"], *stbl)
    sample_size, count = struct.unpack(">II", data[s + 4:s + 12])
    s, _ = find(data, ["stsd"], *stbl)
    entry = s + 8  # version/flags, entry count; then the sample entry box
    fourcc = data[entry + 4:entry + 8].decode("latin-1")
    width, height = struct.unpack(">HH", data[entry + 8 + 24:entry + 8 + 28])  # VisualSampleEntry
    return first, count, width, height, fourcc


@unittest.skipIf(np is None, "numpy/PIL not installed (scripts/install-deps installs them)")
class StemMovie(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tm-stem-movie-")
        r = run(["stem", "demo", "--out", cls.dir, "--scan", "%d,%d" % (SCAN, SCAN), "--detector", str(K), "--json"])
        assert r.code == 0, r.err
        cls.master = r.json()["master"]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def copy_acquisition(self, name):
        """The demo's HDF5 files copied into a new folder; its master file."""
        folder = self.path(name)
        os.makedirs(folder)
        source = os.path.dirname(self.master)
        for f in os.listdir(source):
            if f.endswith(".h5"):
                shutil.copy(os.path.join(source, f), folder)
        return os.path.join(folder, os.path.basename(self.master))

    def movie(self, out, *args):
        r = run(["stem", "movie", self.master, "-o", self.path(out), "--json"] + list(args))
        self.assertEqual(r.code, 0, r.err)
        return r.json()

    def png(self, product, *args):
        out = self.path("frame.png")
        r = run(["stem", product, self.master, "-o", out] + list(args))
        self.assertEqual(r.code, 0, r.err)
        return png_rgba(out)

    def assert_caption(self, frame, height, bar_px, paper=(0, 0, 0), ink=(255, 255, 255)):
        """The strip below the render: paper with the label in ink, and an ink bar of bar_px from x = 2."""
        strip = frame[height:]
        self.assertEqual(strip.shape[0], CAPTION)
        colours = {tuple(int(x) for x in c) for c in strip.reshape(-1, 3)}
        self.assertEqual(colours, {tuple(paper), tuple(ink)})
        label = strip[3:10]
        self.assertGreater(int((label == ink).all(axis=2).sum()), 20)  # some glyph pixels
        bar_row = (strip[15] == ink).all(axis=1)
        self.assertTrue(bar_row[2:2 + bar_px].all())
        self.assertFalse(bar_row[2 + bar_px])

    def test_patterns_along_a_line_equal_their_png_renders(self):
        j = self.movie("line.gif", "--patterns-along", "1,0:4,6", "--fps", "5", "--colormap", "viridis")
        positions = [(1, 0), (2, 1), (2, 2), (3, 3), (3, 4), (4, 5), (4, 6)]  # 7 = max(|dr|, |dc|) + 1, rounded
        self.assertEqual(j["frames"], len(positions))
        self.assertEqual(j["labels"], ["scan (%d, %d)" % p for p in positions])
        self.assertEqual((j["codec"], j["delay_cs"], j["inexact_frames"]), ("gif", 20, 0))
        self.assertEqual(j["passes"], len(positions))  # one single-position read per pattern
        self.assertEqual(j["scale_bar"], {"units_per_pixel": 5.0, "unit": "mrad"})  # the demo's detector_angle_per_pixel
        self.assertEqual(j["caption"], {"paper": [68, 1, 84], "ink": [253, 231, 37], "height": CAPTION})  # viridis' ends
        frames, info = gif_frames(self.path("line.gif"))
        self.assertEqual(len(frames), len(positions))
        self.assertEqual(info.get("loop"), 0)
        self.assertEqual(info.get("duration"), 200)
        for (r, c), frame in zip(positions, frames):
            png = self.png("mean-dp", "--scan-region", "%d,%d,%d,%d" % (r, r + 1, c, c + 1), "--colormap", "viridis")
            self.assertEqual(frame.shape, (png.shape[0] + CAPTION, png.shape[1], 3))
            self.assertEqual((j["width"], j["height"]), (frame.shape[1], frame.shape[0]))
            np.testing.assert_array_equal(frame[:png.shape[0]], as_frame(png, j["caption"]["paper"]))
            # 32 px x 5 mrad, a third: 53 mrad -> a 50 mrad bar of 10 detector pixels x 8 image pixels each
            self.assertEqual(png.shape[0], 256)
            self.assertEqual(png.shape[1], 256 + 8 + 16)
            self.assertEqual(frame.dtype, np.uint8)
            self.assert_caption(frame, png.shape[0], 80, j["caption"]["paper"], j["caption"]["ink"])
        self.assertFalse(np.array_equal(frames[0][256:], frames[1][256:]))  # the labels differ

    def test_steps_sample_the_line_evenly(self):
        j = self.movie("steps.gif", "--patterns-along", "0,0:7,7", "--steps", "3")
        self.assertEqual(j["labels"], ["scan (0, 0)", "scan (4, 4)", "scan (7, 7)"])  # 3.5 rounds away from zero
        j = self.movie("one.gif", "--patterns-along", "5,2:5,2")
        self.assertEqual(j["labels"], ["scan (5, 2)"])

    def test_a_binned_detector_scales_the_bar_and_still_equals_its_png(self):
        j = self.movie("binned.gif", "--patterns-along", "0,0:0,2", "--detector-bin", "2")
        self.assertEqual(j["scale_bar"], {"units_per_pixel": 10.0, "unit": "mrad"})
        frames, _ = gif_frames(self.path("binned.gif"))
        png = self.png("mean-dp", "--scan-region", "0,1,2,3", "--detector-bin", "2")
        np.testing.assert_array_equal(frames[2][:png.shape[0]], as_frame(png, j["caption"]["paper"]))
        # bins unequal on the two axes: no single angular pixel size, the bar is in pixels
        j = self.movie("binned.gif", "--patterns-along", "0,0:0,2", "--detector-bin", "2,1")
        self.assertEqual(j["scale_bar"], {"units_per_pixel": 1.0, "unit": "px"})

    def test_detector_sweep_equals_stem_mask_and_limits_pass_through(self):
        j = self.movie("sweep.gif", "--sweep", "outer", "--inner", "1", "--from", "3", "--to", "9", "--steps", "4",
                       "--transform", "log", "--colormap", "magma")
        radii = [3.0, 5.0, 7.0, 9.0]
        self.assertEqual(j["labels"], ["inner 1.0 px, outer %.1f px" % r for r in radii])
        self.assertEqual(j["display"]["transform"], "log")
        self.assertEqual(j["passes"], 1)  # every annulus summed in one pass over the frames
        frames, _ = gif_frames(self.path("sweep.gif"))
        self.assertEqual(len(frames), 4)
        for r, frame in zip(radii, frames):
            png = self.png("mask", "--inner", "1", "--outer", "%g" % r, "--transform", "log", "--colormap", "magma")
            np.testing.assert_array_equal(frame[:png.shape[0]], as_frame(png, j["caption"]["paper"]))
        self.assertEqual(j["inexact_frames"], 0)  # 256 magma colours in the colour bar, caption in two of them
        j = self.movie("fixed.gif", "--sweep", "inner", "--from", "2", "--to", "2", "--steps", "2", "--outer", "6",
                       "--limits", "0,5e5")
        self.assertEqual(j["display"]["limits"], [[0, 5e5], [0, 5e5]])
        frames, _ = gif_frames(self.path("fixed.gif"))
        png = self.png("mask", "--inner", "2", "--outer", "6", "--limits", "0,5e5")
        for frame in frames:
            np.testing.assert_array_equal(frame[:png.shape[0]], as_frame(png, (0, 0, 0)))
            # 8 positions x the demo's scan step (< 1 A), a third: a 0.5 A bar of 256 / 8 image pixels per position
            step = j["scale_bar"]["units_per_pixel"]
            self.assertEqual(j["scale_bar"]["unit"], "A")
            self.assertTrue(0.5 <= step * 8 / 3 < 1, step)
            self.assert_caption(frame, png.shape[0], round(0.5 / step * 32))

    @unittest.skipIf(h5py is None, "h5py not installed (scripts/install-deps installs it)")
    def test_the_bar_follows_the_detector_angle_rule_without_a_disk_pass(self):
        master = self.copy_acquisition("no-angle")
        with h5py.File(master, "r+") as f:
            del f["entry/sample/simulation/detector_angle_per_pixel"]
        cases = [([], {"units_per_pixel": 1.0, "unit": "px"}),                              # nothing to go by
                 (["--radius", "4"], {"units_per_pixel": 5.0, "unit": "mrad"}),             # the file's 20 mrad / 4 px
                 (["--radius", "4", "--semiangle-mrad", "30"], {"units_per_pixel": 7.5, "unit": "mrad"}),
                 (["--detector-mrad-per-px", "2"], {"units_per_pixel": 2.0, "unit": "mrad"})]
        for args, bar in cases:
            with self.subTest(args=args):
                r = run(["stem", "movie", master, "-o", self.path("angle.gif"), "--patterns-along", "0,0:0,1", "--json"] + args)
                self.assertEqual(r.code, 0, r.err)
                self.assertEqual(r.json()["scale_bar"], bar)

    def test_a_sweep_to_the_whole_detector_equals_stem_mask(self):
        j = self.movie("whole.gif", "--sweep", "outer", "--inner", "0", "--from", "20", "--to", "40", "--steps", "2")
        frames, _ = gif_frames(self.path("whole.gif"))
        for outer, frame in zip([20, 40], frames):  # 20: dense (total - complement); 40: every pixel, read directly
            png = self.png("mask", "--inner", "0", "--outer", str(outer))
            np.testing.assert_array_equal(frame[:png.shape[0]], as_frame(png, j["caption"]["paper"]))

    def test_shared_limits_are_the_union_of_the_frames_limits(self):
        args = ["--sweep", "outer", "--inner", "0", "--from", "2", "--to", "12", "--steps", "4"]
        own = self.movie("own.gif", *args)["display"]["limits"]
        self.assertEqual(len({tuple(l) for l in own}), 4)  # each frame its own range
        j = self.movie("shared.gif", *args, "--shared-limits")
        lo, hi = min(l[0] for l in own), max(l[1] for l in own)
        self.assertTrue(j["shared_limits"])
        self.assertEqual(j["display"]["limits"], [[lo, hi]] * 4)
        frames, _ = gif_frames(self.path("shared.gif"))
        for outer, frame in zip([2, 12], [frames[0], frames[3]]):
            png = self.png("mask", "--inner", "0", "--outer", str(outer), "--limits", "%r,%r" % (lo, hi))
            np.testing.assert_array_equal(frame[:png.shape[0]], as_frame(png, j["caption"]["paper"]))
        # patterns too; given --limits win
        j = self.movie("shared_line.gif", "--patterns-along", "0,0:3,3", "--shared-limits")
        self.assertEqual(len({tuple(l) for l in j["display"]["limits"]}), 1)
        j = self.movie("shared_line.gif", "--patterns-along", "0,0:3,3", "--shared-limits", "--limits", "1,100")
        self.assertEqual(j["display"]["limits"], [[1, 100]] * 4)

    def test_mp4_holds_the_frames_at_even_size(self):
        j = self.movie("line.mp4", "--patterns-along", "0,0:7,7", "--fps", "12")
        self.assertEqual((j["frames"], j["fps"], j["format"]), (8, 12, "mp4"))
        first, count, width, height, fourcc = mp4_video(self.path("line.mp4"))
        self.assertEqual(first, "ftyp")
        self.assertEqual((count, fourcc), (8, "avc1"))
        self.assertEqual((width, height), (j["coded_width"], j["coded_height"]))
        self.assertEqual((width, height), (280, 256 + CAPTION))
        # an odd caption height would be padded: the sweep's frames are the same size, even too
        j = self.movie("sweep.mp4", "--sweep", "inner", "--from", "0", "--to", "3", "--steps", "5", "--outer", "8")
        self.assertEqual(mp4_video(self.path("sweep.mp4"))[1:3], (5, j["coded_width"]))

    def test_text_report(self):
        r = run(["stem", "movie", self.master, "-o", self.path("t.gif"), "--patterns-along", "0,0:0,3"])
        self.assertEqual(r.code, 0, r.err)
        self.assertIn("4 (patterns along)", r.out)
        self.assertIn("5 mrad per pixel", r.out)

    def test_bad_inputs_are_clear_errors(self):
        gif = self.path("bad.gif")
        cases = [
            (["-o", self.path("x.avi"), "--patterns-along", "0,0:1,1"], 2, "x.avi: a movie is written as .gif or .mp4"),
            (["-o", gif, "--patterns-along", "0,0:8,1"], 2, "scan position (8, 1) is outside the scan of 8 x 8 positions"),
            (["-o", gif, "--patterns-along", "0,0-1,1"], 2, "expected R0,C0:R1,C1"),
            (["-o", gif, "--patterns-along", "0,0:1,1", "--steps", "0"], 2, "--steps: expected an integer from 1 to 512 (frames), got '0'"),
            (["-o", gif, "--sweep", "inner", "--from", "1", "--to", "3", "--steps", "-2"], 2, "--steps: expected an integer from 1 to 512 (frames), got '-2'"),
            (["-o", gif, "--sweep", "inner", "--from", "-1", "--to", "3"], 2, "--from: expected a number from 0 to 1000000 (detector pixels), got '-1'"),
            (["-o", gif, "--sweep", "outer", "--inner", "-2", "--from", "3", "--to", "5"], 2, "--inner: expected a number from 0 to 1000000 (detector pixels), got '-2'"),
            (["-o", gif, "--sweep", "outer", "--from", "3", "--to", "5"], 2, "--sweep outer needs --inner"),
            (["-o", gif, "--sweep", "inner", "--from", "1", "--to", "9", "--outer", "5"], 2, "px > outer 5.0 px: sweep within the fixed radius"),
            (["-o", gif, "--sweep", "middle", "--from", "1", "--to", "2"], 2, "--sweep: expected inner or outer, got 'middle'"),
            (["-o", gif], 2, "give one of --patterns-along"),
            (["-o", gif, "--patterns-along", "0,0:1,1", "--scan-bin", "2"], 2, "no --scan-region or --scan-bin"),
            (["-o", gif, "--patterns-along", "0,0:1,1", "--colormap", "jet"], 2, "jet"),
            (["-o", gif, "--patterns-along", "0,0:1,1", "--fps", "0"], 2, "--fps: expected a number in (0, 100] (frames per second), got '0'"),
            (["-o", os.path.join(self.dir, "no", "such", "x.gif"), "--patterns-along", "0,0:1,1"], 6,
             os.path.join(self.dir, "no", "such", "x.gif") + ": cannot create"),
            (["-o", os.path.join(self.dir, "no", "such", "x.mp4"), "--patterns-along", "0,0:1,1"], 6,
             os.path.join(self.dir, "no", "such", "x.mp4") + ": cannot create"),
        ]
        for args, code, text in cases:
            with self.subTest(args=args):
                r = run(["stem", "movie", self.master] + args)
                self.assertEqual(r.code, code, r.err)
                self.assertIn(text, r.err)
        self.assertFalse(os.path.exists(gif))

    def test_an_incomplete_acquisition_names_the_missing_file_and_leaves_no_movie(self):
        master = self.copy_acquisition("broken")
        broken = os.path.dirname(master)
        data = sorted(f for f in os.listdir(broken) if "_data_" in f)
        os.remove(os.path.join(broken, data[1]))  # frames 16..31: scan rows 2 and 3
        out = self.path("broken.gif")
        r = run(["stem", "movie", master, "-o", out, "--patterns-along", "0,0:7,7"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn(data[1], r.err)
        self.assertIn("which does not exist", r.err)
        self.assertFalse(os.path.exists(out))  # two frames were written before the third failed: removed
        r = run(["stem", "movie", master, "-o", self.path("broken.mp4"), "--sweep", "inner", "--from", "1", "--to", "2"])
        self.assertEqual(r.code, 3, r.err)
        self.assertIn(data[1], r.err)
        self.assertFalse(os.path.exists(self.path("broken.mp4")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
