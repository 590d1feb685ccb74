"""The generated blocks of docs/benchmarks.md: text between two marker
comments, rewritten by a report script; the hand-written text around them
stays."""


def replace_block(path, start, end, body, heading):
    """Put `body` between the markers `start` and `end` in the file at
    `path`; where they are missing, append a new section `heading` with
    the markers and `body`."""
    doc = open(path).read()
    if start in doc and end in doc:
        head, rest = doc.split(start, 1)
        _, tail = rest.split(end, 1)
        doc = f"{head}{start}\n{body}\n{end}{tail}"
    else:
        doc = doc.rstrip("\n") + f"\n\n## {heading}\n\n{start}\n{body}\n{end}\n"
    open(path, "w").write(doc)
