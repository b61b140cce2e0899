# Front door: `make run` installs what running needs, builds the deepinfer command and the
# Python module, and chats with a small model; `make test` installs everything and runs every
# test (what CI runs).
.PHONY: run test build format
run:
	scripts/run_demo.sh
test:
	scripts/test.sh
build:
	scripts/setup.sh run && scripts/build.sh run
format:
	find src tests bench python -name '*.cpp' -o -name '*.h' | xargs clang-format -i
