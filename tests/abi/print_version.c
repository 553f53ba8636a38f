/* print_version.c - prints what the linked libgang says of its version:
 * gang_version_string(), then gang_version_number() as MAJOR.MINOR.PATCH
 * (abi.versions compares both with the project's). */
#include <stdio.h>

#include <gang/gang.h>

int main(void) {
  const unsigned n = gang_version_number();
  printf("%s\n%u.%u.%u\n", gang_version_string(), n / 10000, n / 100 % 100, n % 100);
  return 0;
}
