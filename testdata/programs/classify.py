# A program that uses the task model: the artifact is the prompt.
from skynet import llm


def run(artifact, input):
    return llm(artifact, input=input["message"]).strip().lower()
