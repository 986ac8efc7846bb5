cd "$(dirname "$0")/.."; SECONDS=0
python3 setup.py build_ext --inplace > /dev/null 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 45 compute-sanitizer --tool racecheck --racecheck-report hazard python3 .ab/rc.py 2>&1 | tail -4; echo "racecheck ${SECONDS}s"
