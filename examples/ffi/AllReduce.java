// A 2-rank all-reduce through libgang's C ABI from Java with JNA: built and
// run under gangrun, e.g.
//   javac -cp /usr/share/java/jna.jar -d /tmp examples/ffi/AllReduce.java
//   build/gangrun --nproc-per-node 2 -- java -cp /usr/share/java/jna.jar:/tmp AllReduce build/libgang.so.0
import com.sun.jna.Library;
import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.PointerByReference;

public class AllReduce {
  // size_t is a Java long: this example is for LP64 (x86-64, aarch64).
  public interface Gang extends Library {
    void gang_options_init_v(Pointer options, long structSize);
    int gang_create(Pointer options, PointerByReference out);
    int gang_rank(Pointer g);
    int gang_size(Pointer g);
    int gang_all_reduce(Pointer g, float[] send, float[] recv, long count, int dtype, int op,
                        Pointer work);
    int gang_destroy(Pointer g);
    String gang_last_error();
  }

  static final int GANG_FLOAT32 = 8, GANG_SUM = 0;
  static final int OPTIONS_SIZE = 72; // sizeof(gang_options_t) on LP64

  static Gang lib;

  static void check(int status, String what) {
    if (status != 0) {
      System.err.println(what + ": status " + status + ": " + lib.gang_last_error());
      System.exit(1);
    }
  }

  public static void main(String[] args) {
    lib = Native.load(args.length > 0 ? args[0] : "gang", Gang.class);
    Memory options = new Memory(OPTIONS_SIZE);
    options.clear();
    lib.gang_options_init_v(options, OPTIONS_SIZE);
    PointerByReference out = new PointerByReference();
    check(lib.gang_create(options, out), "gang_create");
    Pointer g = out.getValue();
    int rank = lib.gang_rank(g), size = lib.gang_size(g);
    float[] x = new float[4], y = new float[4];
    java.util.Arrays.fill(x, rank + 1);
    check(lib.gang_all_reduce(g, x, y, 4, GANG_FLOAT32, GANG_SUM, null), "gang_all_reduce");
    float want = size * (size + 1) / 2.0f;
    for (float v : y) {
      if (v != want) {
        System.err.println("rank " + rank + ": got " + v + ", want " + want);
        System.exit(1);
      }
    }
    System.out.println("java jna: rank " + rank + " of " + size + ": sum " + y[0]);
    check(lib.gang_destroy(g), "gang_destroy");
  }
}
