# The pandas example from the AIO Sandbox guide: load the sales data, compute
# the margin and describe it. Run it with the data copied in:
#   codecell run --put examples/sales.csv:/tmp/analysis/sales.csv examples/margin.py
import pandas as pd
df = pd.read_csv("/tmp/analysis/sales.csv")
df["margin"] = df.revenue - df.cost
print(df.margin.describe())
