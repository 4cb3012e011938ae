"""The `MEDIA:` lines of a reply and where their files may come from."""

from __future__ import annotations

from sessiongate.adapters.kit.media_out import file_name, locate, split_media


def test_media_lines_are_taken_out_of_the_text():
    text, refs = split_media("Here it is:\n\nMEDIA: /srv/out/a.png\n\nMEDIA:b.pdf\n\nEnjoy.")
    assert refs == ["/srv/out/a.png", "b.pdf"]
    assert text == "Here it is:\n\nEnjoy."


def test_a_media_url_stays_in_the_text_as_a_link():
    reply = "See\nMEDIA: https://example.com/x.png"
    assert split_media(reply) == (reply, [])


def test_text_without_media_is_unchanged():
    assert split_media("  no files\n\n\n here ") == ("  no files\n\n\n here ", [])


def test_only_files_inside_the_folders_are_found(tmp_path):
    root = tmp_path / "out"
    root.mkdir()
    (root / "ok.txt").write_text("x")
    (tmp_path / "secret.txt").write_text("x")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    roots = (root.resolve(),)
    assert locate("ok.txt", roots) == (root / "ok.txt").resolve()
    assert locate(f"file://{root / 'ok.txt'}", roots) == (root / "ok.txt").resolve()
    assert "not in a folder" in str(locate("../secret.txt", roots))
    assert "not in a folder" in str(locate(str(tmp_path / "secret.txt"), roots))
    assert "not in a folder" in str(locate("link.txt", roots))  # a link out is followed
    assert "does not exist" in str(locate("gone.txt", roots))
    assert "not enabled" in str(locate("ok.txt", ()))
    assert file_name("file:///srv/out/a%20b.png") == "a b.png"
