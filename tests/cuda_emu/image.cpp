// Reading the image that NVRTC produced, as the driver does when it loads a
// module: a CUBIN (an ELF file: kernel symbols, each kernel's parameter
// sizes, launch bounds and register count from its .nv.info records) or PTX
// text (the .entry declarations). The emulator executes the host build of
// the same source, and checks every launch against what the image declares.
#include "emu.h"

#include <cstring>
#include <map>
#include <sstream>

namespace emu {
namespace {

// ELF64 structures (little endian), as far as they are read here.
struct Ehdr {
    unsigned char ident[16];
    uint16_t type, machine;
    uint32_t version;
    uint64_t entry, phoff, shoff;
    uint32_t flags;
    uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
};
struct Shdr {
    uint32_t name, type;
    uint64_t flags, addr, offset, size;
    uint32_t link, info;
    uint64_t addralign, entsize;
};
struct Sym {
    uint32_t name;
    unsigned char info, other;
    uint16_t shndx;
    uint64_t value, size;
};

constexpr unsigned char EM_CUDA = 190;
// .nv.info attributes (EIATTR_*) and their formats.
constexpr unsigned char FMT_SVAL = 4;
constexpr unsigned char ATTR_KPARAM_INFO = 0x17;
constexpr unsigned char ATTR_MAX_THREADS = 0x05;
constexpr unsigned char ATTR_REGCOUNT = 0x2f;

// Walks the attribute records of an .nv.info section, calling f(attr,
// payload, size) for each record with a payload.
template <class F>
bool records(const unsigned char *p, size_t n, F f) {
    size_t at = 0;
    while (at + 4 <= n) {
        unsigned char fmt = p[at], attr = p[at + 1];
        if (fmt == FMT_SVAL) {
            uint16_t size;
            std::memcpy(&size, p + at + 2, 2);
            if (at + 4 + size > n) return false;
            f(attr, p + at + 4, size);
            at += 4 + size;
        } else {
            at += 4;  // EIFMT_NVAL, BVAL, HVAL: the value fits the header
        }
    }
    return at == n;
}

CUresult parse_cubin(const unsigned char *d, Image *out, std::string *why) {
    Ehdr h;
    std::memcpy(&h, d, sizeof h);
    if (h.ident[4] != 2 || h.machine != EM_CUDA || h.shentsize != sizeof(Shdr)) {
        *why = "an ELF file, but not a 64-bit CUDA CUBIN";
        return INVALID_IMAGE;
    }
    out->cubin = true;
    // OS/ABI 0x41 with ABI version 8 is the CUDA 13 format (architecture in
    // bits 8-15 of e_flags); 0x33 with version 7 the older one (bits 0-7).
    out->new_abi = h.ident[7] == 0x41;
    out->arch = out->new_abi ? (h.flags >> 8) & 0xff : h.flags & 0xff;
    std::vector<Shdr> sec(h.shnum);
    std::memcpy(sec.data(), d + h.shoff, h.shnum * sizeof(Shdr));
    const char *shstr = reinterpret_cast<const char *>(d + sec[h.shstrndx].offset);
    std::map<std::string, size_t> by_name;
    for (size_t i = 0; i < sec.size(); ++i) by_name[shstr + sec[i].name] = i;
    // Kernels: global function symbols marked as entries (STO_CUDA_ENTRY).
    std::map<uint32_t, std::string> entry_of_symbol;
    for (auto &s : sec) {
        if (s.type != 2 /* SHT_SYMTAB */) continue;
        const char *str = reinterpret_cast<const char *>(d + sec[s.link].offset);
        for (size_t i = 0; i < s.size / sizeof(Sym); ++i) {
            Sym y;
            std::memcpy(&y, d + s.offset + i * sizeof(Sym), sizeof y);
            if ((y.info & 0xf) == 2 && (y.info >> 4) == 1 && (y.other & 0x10)) {
                entry_of_symbol[static_cast<uint32_t>(i)] = str + y.name;
            }
        }
    }
    std::map<std::string, unsigned> regs;
    if (by_name.count(".nv.info")) {
        const Shdr &s = sec[by_name[".nv.info"]];
        records(d + s.offset, s.size, [&](unsigned char attr, const unsigned char *p, uint16_t n) {
            if (attr == ATTR_REGCOUNT && n == 8) {
                uint32_t sym, count;
                std::memcpy(&sym, p, 4);
                std::memcpy(&count, p + 4, 4);
                if (entry_of_symbol.count(sym)) regs[entry_of_symbol[sym]] = count;
            }
        });
    }
    for (auto &e : entry_of_symbol) {
        ImageKernel k;
        k.name = e.second;
        auto info = by_name.find(".nv.info." + k.name);
        if (info == by_name.end()) {
            *why = "kernel " + k.name + " has no .nv.info section";
            return INVALID_IMAGE;
        }
        const Shdr &s = sec[info->second];
        std::map<unsigned, unsigned> sizes;
        bool ok = records(d + s.offset, s.size, [&](unsigned char attr, const unsigned char *p, uint16_t n) {
            if (attr == ATTR_KPARAM_INFO && n == 12) {
                uint16_t ordinal;
                uint32_t flags;
                std::memcpy(&ordinal, p + 4, 2);
                std::memcpy(&flags, p + 8, 4);
                sizes[ordinal] = flags >> 18;
            } else if (attr == ATTR_MAX_THREADS && n == 12) {
                std::memcpy(k.max_threads, p, 12);
            }
        });
        if (!ok) {
            *why = "kernel " + k.name + " has a malformed .nv.info section";
            return INVALID_IMAGE;
        }
        for (unsigned i = 0; i < sizes.size(); ++i) {
            if (!sizes.count(i)) {
                *why = "kernel " + k.name + " lacks the size of parameter " + std::to_string(i);
                return INVALID_IMAGE;
            }
            k.params.push_back(sizes[i]);
        }
        if (regs.count(k.name)) {
            k.registers = regs[k.name];
        } else if (by_name.count(".text." + k.name)) {
            k.registers = sec[by_name[".text." + k.name]].info >> 24;
        }
        if (by_name.count(".nv.shared." + k.name)) {
            k.shared_bytes = static_cast<unsigned>(sec[by_name[".nv.shared." + k.name]].size);
        }
        out->kernels.push_back(k);
    }
    return OK;
}

// The size of a PTX parameter type (.u64, .b32, .f32, ...).
unsigned ptx_size(const std::string &type) {
    std::string bits;
    for (char c : type) {
        if (c >= '0' && c <= '9') bits += c;
    }
    return bits.empty() ? 0 : static_cast<unsigned>(std::stoi(bits)) / 8;
}

CUresult parse_ptx(const char *text, Image *out, std::string *why) {
    std::string s(text);
    auto field = [&](const char *key) -> std::string {
        auto at = s.find(key);
        if (at == std::string::npos) return "";
        std::istringstream in(s.substr(at + std::strlen(key)));
        std::string v;
        in >> v;
        return v;
    };
    std::string version = field(".version"), target = field(".target");
    if (version.empty() || target.rfind("sm_", 0) != 0) {
        *why = "neither a CUBIN nor PTX with .version and .target";
        return INVALID_PTX;
    }
    auto dot = version.find('.');
    out->ptx_version = std::stoi(version.substr(0, dot)) * 10 + std::stoi(version.substr(dot + 1));
    out->arch = std::stoi(target.substr(3));
    size_t at = 0;
    while ((at = s.find(".entry ", at)) != std::string::npos) {
        ImageKernel k;
        size_t open = s.find('(', at), close = s.find(')', open), body = s.find('{', close);
        if (open == std::string::npos || close == std::string::npos || body == std::string::npos) {
            *why = "a truncated .entry";
            return INVALID_PTX;
        }
        std::istringstream name(s.substr(at + 7, open - at - 7));
        name >> k.name;
        std::istringstream params(s.substr(open + 1, close - open - 1));
        std::string word;
        while (params >> word) {
            if (word == ".param") {
                params >> word;
                k.params.push_back(ptx_size(word));
            }
        }
        std::string between = s.substr(close, body - close);
        auto nt = between.find(".maxntid");
        if (nt != std::string::npos) {
            std::istringstream dims(between.substr(nt + 8));
            char comma;
            dims >> k.max_threads[0] >> comma >> k.max_threads[1] >> comma >> k.max_threads[2];
        }
        out->kernels.push_back(k);
        at = body;
    }
    return OK;
}

}  // namespace

CUresult parse_image(const void *data, Image *out, std::string *why) {
    if (!data) {
        *why = "no image";
        return INVALID_VALUE;
    }
    const auto *d = static_cast<const unsigned char *>(data);
    if (!std::memcmp(d, "\x7f" "ELF", 4)) return parse_cubin(d, out, why);
    return parse_ptx(static_cast<const char *>(data), out, why);
}

}  // namespace emu
