#ifndef CLIBCRYPTO_SHIM_H
#define CLIBCRYPTO_SHIM_H
#include <openssl/sha.h>
#include <openssl/rand.h>
#include <openssl/evp.h>
#endif
