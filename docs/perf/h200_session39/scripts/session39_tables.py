"""Session 39's tables from the raw outputs (run from docs/perf/h200_session39):
call 1: the register-fed kernel (flag 32768) against the kernels' own plan (default) in caa8991 and dd6063c, from
binary_ab.txt (tools/binary_ab_report.py's lines: the base version's us per round, then the other's ratio per round;
the other version's raw JSONs did not come back from the device, the report has every figure);
call 4: four builds of the register-fed kernel against dd6063c, per round."""
import re


def report_tables(path):
    """{(step, config): {(shape, m): [numbers...]}} from a binary_ab report."""
    tables, current = {}, None
    for line in open(path):
        head = re.match(r"(ab_none|ab_copy) \(tools/config_ab.py --after \w+\), config (\S+):", line)
        if head:
            current = tables.setdefault((head.group(1), head.group(2)), {})
            continue
        row = re.match(r"\s*(\d+x\d+)\s+(\d+)\s+fp32\s+(.*)$", line)
        if row and current is not None:
            current[(row.group(1), int(row.group(2)))] = [float(v) for v in row.group(3).split()]
    return tables


def call1():
    t = report_tables("call1_binary_ab_probe_dd6063c/binary_ab.txt")
    for step in ("ab_none", "ab_copy"):
        d, f = t[(step, "default")], t[(step, "[0,0,0,0,32768]")]
        print(f"call 1, {step}: us per round (caa8991 default | caa8991 flag 32768 | dd6063c default | dd6063c flag);"
              " flag / default in each build, mean of the 2 rounds")
        for key in sorted(d):
            old_d, old_f = d[key][:2], f[key][:2]
            new_d = [a * r for a, r in zip(old_d, d[key][2:])]
            new_f = [a * r for a, r in zip(old_f, f[key][2:])]
            old_ratio = sum(a / b for a, b in zip(old_f, old_d)) / 2
            new_ratio = sum(a / b for a, b in zip(new_f, new_d)) / 2
            print(f"  {key[0]:>10} {key[1]} | " + " ".join(f"{v:6.2f}" for v in old_d + old_f + new_d + new_f)
                  + f" | caa8991 {old_ratio:.3f}  dd6063c {new_ratio:.3f}")


def call4():
    t = report_tables("call4_binary_ab_in_flight_dd6063c/binary_ab.txt")
    for step in ("ab_none", "ab_copy"):
        rows = t[(step, "[0,0,0,0,32768]")]
        print(f"call 4, {step}, flag 32768: dd6063c us r1 r2; 66ba02c, 27142b0, f45c8f2 / dd6063c per round")
        for key in sorted(rows):
            v = rows[key]
            print(f"  {key[0]:>10} {key[1]} | {v[0]:6.2f} {v[1]:6.2f} | 66ba02c {v[2]:.3f} {v[3]:.3f} | "
                  f"27142b0 {v[4]:.3f} {v[5]:.3f} | f45c8f2 {v[6]:.3f} {v[7]:.3f}")


if __name__ == "__main__":
    call1()
    call4()
