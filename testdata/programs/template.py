# A program with no model: the artifact is a template filled from the input.
def run(artifact, input):
    return artifact.format(**input)
