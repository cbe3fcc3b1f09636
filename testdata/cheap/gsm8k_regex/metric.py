# A cheap grader written as RL math rewards are (verl's
# utils/reward_score/gsm8k.py): on the last 300 characters, the answer
# after "####" (strict), else the last number (flexible); a format score
# for an answer in the wrong place. About 10 us a case in python3.
import re

_CLIP = 300


def extract_solution(solution_str, method="strict"):
    if len(solution_str) > _CLIP:
        solution_str = solution_str[-_CLIP:]
    if method == "strict":
        solutions = re.findall("#### (\\-?[0-9\\.\\,]+)", solution_str)
        if len(solutions) == 0:
            return None
        return solutions[-1].replace(",", "").replace("$", "")
    answer = re.findall("(\\-?[0-9\\.\\,]+)", solution_str)
    final_answer = None
    for final_answer in reversed(answer):
        if final_answer not in ("", "."):
            break
    return final_answer.replace(",", "").rstrip(".") if final_answer else None


def score(input, output, expected=None):
    truth = expected["answer"]
    strict = extract_solution(output, "strict")
    if strict is not None:
        if strict == truth:
            return 1.0, {"feedback": "Correct final answer after '####'."}
        return 0.0, {"feedback": f"The final answer {strict} is wrong."}
    flexible = extract_solution(output, "flexible")
    if flexible == truth:
        return 0.1, {"feedback": "The right number, but not after '####': end with '#### <answer>'."}
    return 0.0, {"feedback": "No final answer after '####'."}
