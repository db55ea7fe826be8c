"""Sleep until killed."""

import time


def main() -> None:
    print("sleeping", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
