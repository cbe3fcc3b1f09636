# A program with no model: the artifact holds "keyword: label" lines, and
# run returns the label of the first keyword found in the message.
def run(artifact, input):
    message = input["message"].lower()
    for line in artifact.splitlines():
        keyword, _, label = line.partition(":")
        if keyword.strip() and keyword.strip().lower() in message:
            return label.strip()
    return "other"
