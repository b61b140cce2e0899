# Front door: `make run` builds and runs the demo; `make test` builds and runs every test.
.PHONY: run test build format
run:
	scripts/run_demo.sh
test:
	scripts/test.sh
build:
	scripts/setup.sh && scripts/build.sh release
format:
	find src tests bench -name '*.cpp' -o -name '*.h' | xargs clang-format -i
